import { brand } from './brand.js';
import { RpcException } from '@nestjs/microservices';

/**
 * Throw it from a handler to say "do not retry": the entry goes to its dead-letter stream at
 * once. An `RpcException`, so Nest's exception layer hands its marker through to the transport.
 */
export class DeadLetterException extends RpcException {
  constructor(reason: string) {
    super({ status: 'error', message: reason, deadLetter: true });
  }
}
brand(DeadLetterException, 'DeadLetterException');

export { isDeadLetter } from './dead-letter-mark.js';
