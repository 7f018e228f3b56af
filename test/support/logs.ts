import type { LoggerService } from '@nestjs/common';

/** A Nest logger that keeps every line (level and message), for tests that check what was logged. */
export function captureLogs(): { logger: LoggerService; lines: string[]; text: () => string } {
  const lines: string[] = [];
  const keep = (level: string) => (message: unknown) => void lines.push(`${level} ${String(message)}`);
  const logger: LoggerService = {
    log: keep('log'),
    error: keep('error'),
    warn: keep('warn'),
    debug: keep('debug'),
    verbose: keep('verbose'),
  };
  return { logger, lines, text: () => lines.join('\n') };
}
