import { RpcException } from '@nestjs/microservices';
import { brand } from './brand.js';

/**
 * Thrown by a handler when a downstream says "too many requests" (a 429 with `Retry-After`): this
 * entry is tried again in `delayMs` **without counting the delivery** (it never reaches the
 * dead-letter stream for it), and a rate-limited pattern (`@StreamPattern(p, { rateLimit })`)
 * starts nothing for `delayMs`, in every worker of the group. A fraction of a ms is rounded; a delay that is
 * no finite number from 0 makes it an ordinary (counted) failure. docs/guide/flow-control.md.
 */
export class RateLimitedException extends RpcException {
  constructor(
    readonly delayMs: number,
    message = `rate limited for ${delayMs} ms`,
  ) {
    super({ status: 'error', message, retryInMs: delayMs, rateLimited: true });
  }
}
brand(RateLimitedException, 'RateLimitedException');
