import { InvalidOptionError, rejectUnknown, shown } from './validate.js';

/** `@StreamPattern(p, { rateLimit })`: at most `max` entries of the pattern started per `perMs`, by the whole group. */
export interface RateLimit {
  max: number;
  perMs: number;
}

/** Most a limit may allow per window: its grants are members of one sorted set. */
export const MAX_RATE_LIMIT = 100_000;
/** Longest window: a day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;

/** A pattern's `rateLimit`, validated (each part named in the error); undefined when absent. */
export function resolveRateLimit(option: string, value: unknown): RateLimit | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(option, 'must be { max, perMs }');
  rejectUnknown(value, ['max', 'perMs'], `${option}.`);
  const { max, perMs } = value as { max?: unknown; perMs?: unknown };
  return { max: whole(`${option}.max`, max, MAX_RATE_LIMIT), perMs: whole(`${option}.perMs`, perMs, MAX_RATE_WINDOW_MS) };
}

function whole(option: string, value: unknown, most: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > most)
    throw new InvalidOptionError(option, `must be a whole number from 1 to ${most}, got ${shown(value)}`);
  return value;
}
