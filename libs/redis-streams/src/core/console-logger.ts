import type { Logger } from '../ports.js';

const PREFIX = '[nestjs-redis-streams]';

/** StreamConsumer's default logger: the console, each line prefixed; a handler's stack below its line. */
export const consoleLogger: Logger = {
  log: (message) => console.log(`${PREFIX} ${message}`),
  warn: (message) => console.warn(`${PREFIX} ${message}`),
  error: (message, stack) => console.error(stack ? `${PREFIX} ${message}\n${stack}` : `${PREFIX} ${message}`),
};

/** `logger: false`. */
export const silentLogger: Logger = { log: () => undefined, warn: () => undefined, error: () => undefined };
