import type { LoggerService } from '@nestjs/common';

/**
 * A Nest logger that keeps every line (level and message), for tests that check what was logged.
 * Nest's logger is global: once installed, every app of the process logs here, so `from(context)`
 * gives the lines of one logger context (e.g. 'RedisStreamsClient') alone.
 */
export function captureLogs(): { logger: LoggerService; lines: string[]; text: () => string; from: (context: string) => string[] } {
  const lines: string[] = [];
  const contexts: unknown[] = [];
  // Nest passes a named logger's context as the last argument.
  const keep =
    (level: string) =>
    (message: unknown, ...rest: unknown[]) => {
      lines.push(`${level} ${String(message)}`);
      contexts.push(rest.at(-1));
    };
  const logger: LoggerService = {
    log: keep('log'),
    error: keep('error'),
    warn: keep('warn'),
    debug: keep('debug'),
    verbose: keep('verbose'),
  };
  const from = (context: string) => lines.filter((_, i) => contexts[i] === context);
  return { logger, lines, text: () => lines.join('\n'), from };
}
