import { describeError } from './describe-error.js';
import type { Logger } from './ports.js';

/** Loggers guardLogger made (a guarded logger passed in again is returned as it is). */
const guarded = new WeakSet<Logger>();

/**
 * What a logger threw, as one printable line: whatever it is, never a throw of its own (review-x F3, F4); masked and
 * bounded as the library's own lines, since it may quote what the logger was given (Nest hands it raw errors: review-a F2).
 */
function describeThrown(err: unknown, secretsOf?: unknown): string {
  try {
    // A thrown string as it is, not quoted as JSON.
    return describeError(typeof err === 'string' ? { message: err } : err, secretsOf);
  } catch {
    return '(unprintable)';
  }
}

/**
 * Writes a line its logger could not take to stderr, with what the logger threw; never throws itself. `secretsOf`:
 * an error the logger was handed raw, whose commands' passwords what it threw may quote.
 */
export function lineLost(message: string, stack: string | undefined, err: unknown, secretsOf?: unknown): void {
  try {
    process.stderr.write(
      `[nestjs-redis-streams] the logger threw (${describeThrown(err, secretsOf)}); its line: ${message}${stack ? `\n${stack}` : ''}\n`,
    );
  } catch {
    // Nowhere left to write: the line is lost, the library goes on.
  }
}

/** The same guard for a logger of one method (the dashboard's action log: `{ log(message) }`). */
export function guardLog(logger: { log(message: string): unknown }): { log(message: string): void } {
  return guardLogger({
    log: (message) => logger.log(message),
    warn: (message) => logger.log(message),
    error: (message) => logger.log(message),
  });
}

/**
 * The host's logger as the library calls it. A logger that throws, or whose promise rejects, is the logger's failure,
 * not the line's: it must not reach the step that logged (a settle half done, a loop restarted, an unhandled
 * rejection, a process ended). The line goes to stderr instead, with what the logger threw. (A Nest `Logger` drops
 * its logger's promise itself: a rejection there never reaches this.)
 */
export function guardLogger(logger: Logger): Logger {
  if (guarded.has(logger)) return logger;
  // Called outside the logger's try: a `then` that cannot be read means no promise, the line taken (review-z);
  // one that throws when called leaves the line's fate unknown, so it goes to stderr.
  const settled = (result: unknown, message: string, stack?: string): void => {
    let then: unknown;
    try {
      then = (result as PromiseLike<unknown> | undefined)?.then;
    } catch {
      return;
    }
    if (typeof then !== 'function') return;
    try {
      (then as PromiseLike<unknown>['then']).call(result, undefined, (err: unknown) => lineLost(message, stack, err));
    } catch (err) {
      lineLost(message, stack, err);
    }
  };
  /** One line: the logger's call made, a throw or a rejection sent to stderr. */
  const line = (call: () => unknown, message: string, stack?: string): void => {
    let result: unknown;
    try {
      result = call();
    } catch (err) {
      return lineLost(message, stack, err);
    }
    settled(result, message, stack);
  };
  const safe: Logger = {
    log: (message) => line(() => logger.log(message), message),
    warn: (message) => line(() => logger.warn(message), message),
    // Called with the arguments it was given: Nest's logger prints an explicit `undefined` as a line of its own.
    error: (message, stack) => line(() => (stack === undefined ? logger.error(message) : logger.error(message, stack)), message, stack),
  };
  guarded.add(safe);
  return safe;
}
