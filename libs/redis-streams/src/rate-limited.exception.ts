import { brand } from './brand.js';
import { RetryLaterException } from './retry-later.exception.js';

/**
 * Thrown by a handler when a downstream says "too many requests" (a 429 with `Retry-After`): this
 * entry is tried again in `delayMs` **without counting the delivery** (it never reaches the
 * dead-letter stream for it), and a rate-limited pattern (`@StreamPattern(p, { rateLimit })`)
 * starts nothing for `delayMs`, in every worker of the group. docs/guide/flow-control.md.
 */
export class RateLimitedException extends RetryLaterException {
  constructor(delayMs: number, message = `rate limited for ${delayMs} ms`) {
    super(delayMs, message);
    (this.getError() as { rateLimited?: boolean }).rateLimited = true;
  }
}
brand(RateLimitedException, 'RateLimitedException');
