import { brand } from '../brand.js';

/**
 * Throw it from a handler to have this entry tried again in `retryInMs` (a downstream said
 * `Retry-After`), whatever the retry policy says; the delivery cap (`maxDeliveries`) still holds:
 * on the last delivery the entry is dead-lettered instead. The core's `RetryLaterException`.
 */
export class RetryLaterError extends Error {
  override readonly name = 'RetryLaterError';

  constructor(
    /** Read by the retry schedule (validated there, as for the exception). */
    readonly retryInMs: number,
    message = `retry in ${retryInMs} ms`,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
brand(RetryLaterError, 'RetryLaterError');
