import { brand } from '../brand.js';

/**
 * Throw it from a handler to say "do not retry": the entry goes to its dead-letter stream at
 * once. The core's `DeadLetterException`, without Nest: `isDeadLetter` accepts both.
 */
export class DeadLetterError extends Error {
  override readonly name = 'DeadLetterError';
  /** Read by `isDeadLetter` on an error of any copy of the package. */
  readonly deadLetter = true;

  constructor(reason: string, options?: ErrorOptions) {
    super(reason, options);
  }
}
brand(DeadLetterError, 'DeadLetterError');
