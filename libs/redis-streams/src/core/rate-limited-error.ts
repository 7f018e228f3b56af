import { brand } from '../brand.js';

/**
 * Throw it from a handler when a downstream says "too many requests": this entry is tried again in
 * `retryInMs` without counting the delivery, and a rate-limited pattern starts nothing for that
 * long in every worker of the group. The core's `RateLimitedException`.
 */
export class RateLimitedError extends Error {
  override readonly name = 'RateLimitedError';
  readonly rateLimited = true;

  constructor(
    /** Read by the retry schedule (validated there, as for the exception): a fraction is rounded to whole ms; no finite number from 0 is an ordinary failure. */
    readonly retryInMs: number,
    message = `rate limited for ${retryInMs} ms`,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
brand(RateLimitedError, 'RateLimitedError');
