import type { Logger } from '../ports.js';

/**
 * The host's logger as the engine calls it. A logger that throws, or whose promise rejects, is the logger's failure,
 * not the line's: it must not reach the step that logged (a settle half done, a loop restarted, an unhandled
 * rejection). The line goes to stderr instead, with what the logger threw.
 */
export function guardLogger(logger: Logger): Logger {
  const fallback = (message: string, stack: string | undefined, err: unknown): void => {
    try {
      const why = err instanceof Error ? err.message : String(err);
      process.stderr.write(`[nestjs-redis-streams] the logger threw (${why}); its line: ${message}${stack ? `\n${stack}` : ''}\n`);
    } catch {
      // Nowhere left to write: the line is lost, the engine goes on.
    }
  };
  const settled = (result: unknown, message: string, stack?: string): void => {
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function')
      (result as PromiseLike<unknown>).then(undefined, (err: unknown) => fallback(message, stack, err));
  };
  return {
    log(message) {
      try {
        settled(logger.log(message), message);
      } catch (err) {
        fallback(message, undefined, err);
      }
    },
    warn(message) {
      try {
        settled(logger.warn(message), message);
      } catch (err) {
        fallback(message, undefined, err);
      }
    },
    error(message, stack) {
      try {
        // Called with the arguments it was given: Nest's logger prints an explicit `undefined` as a line of its own.
        settled(stack === undefined ? logger.error(message) : logger.error(message, stack), message, stack);
      } catch (err) {
        fallback(message, stack, err);
      }
    },
  };
}
