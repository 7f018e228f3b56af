import type { LoggerService } from '@nestjs/common';

/** One captured line with what came beside it: Nest's `error(message, stack, context)` passes the stack second. */
export interface LogRecord {
  line: string;
  stack: string | undefined;
  context: unknown;
}

/**
 * A Nest logger that keeps every line (level and message), for tests that check what was logged.
 * Nest's logger is global: once installed, every app of the process logs here, so `from(context)`
 * gives the lines of one logger context (e.g. 'RedisStreamsClient') alone.
 */
export function captureLogs(): {
  logger: LoggerService;
  lines: string[];
  text: () => string;
  from: (context: string) => string[];
  records: (context: string) => LogRecord[];
} {
  const lines: string[] = [];
  const kept: LogRecord[] = [];
  // Nest passes a named logger's context as the last argument.
  const keep =
    (level: string) =>
    (message: unknown, ...rest: unknown[]) => {
      const line = `${level} ${String(message)}`;
      lines.push(line);
      kept.push({ line, stack: rest.length > 1 && typeof rest[0] === 'string' ? rest[0] : undefined, context: rest.at(-1) });
    };
  const logger: LoggerService = {
    log: keep('log'),
    error: keep('error'),
    warn: keep('warn'),
    debug: keep('debug'),
    verbose: keep('verbose'),
  };
  const records = (context: string) => kept.filter((r) => r.context === context);
  const from = (context: string) => records(context).map((r) => r.line);
  return { logger, lines, text: () => lines.join('\n'), from, records };
}
