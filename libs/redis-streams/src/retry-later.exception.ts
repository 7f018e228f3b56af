import { RpcException } from '@nestjs/microservices';
import { brand } from './brand.js';

/**
 * Thrown by a handler to have this entry tried again in `delayMs` (a downstream said
 * `Retry-After`), whatever the retry policy says; the delivery cap (`maxDeliveries`) still
 * holds: on the last delivery the entry is dead-lettered instead.
 */
export class RetryLaterException extends RpcException {
  constructor(
    readonly delayMs: number,
    message = `retry in ${delayMs} ms`,
  ) {
    super({ status: 'error', message, retryInMs: delayMs });
  }
}
brand(RetryLaterException, 'RetryLaterException');
