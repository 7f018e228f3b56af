import { InvalidOptionError, rejectUnknown, shown } from './validate.js';

/** A per-key limit's key of an entry, from its payload and headers; none (undefined, null, '') leaves the entry unlimited. */
export type RateLimitKeyOf = (payload: any, headers: Readonly<Record<string, string>>) => string | number | null | undefined;

/**
 * `@StreamPattern(p, { rateLimit })`: at most `max` entries of the pattern started per `perMs`, by
 * the whole group; with `perKey`, at most that many of each key.
 */
export interface RateLimit {
  max: number;
  perMs: number;
  /**
   * A limit per key instead of the pattern's: `true` keys by the entry's partition key (the
   * record's `partitionKey`, what `ordered` orders by), a function by what it returns. An entry
   * without a key is not limited. Default: the pattern's limit.
   */
  perKey?: true | RateLimitKeyOf;
}

/** Most a limit may allow per window: its grants are members of one sorted set. */
export const MAX_RATE_LIMIT = 100_000;
/** Longest window: a day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;

/** A pattern's `rateLimit`, validated (each part named in the error); undefined when absent. */
export function resolveRateLimit(option: string, value: unknown): RateLimit | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(option, 'must be { max, perMs }');
  rejectUnknown(value, ['max', 'perMs', 'perKey'], `${option}.`);
  const { max, perMs, perKey } = value as { max?: unknown; perMs?: unknown; perKey?: unknown };
  const limit: RateLimit = { max: whole(`${option}.max`, max, MAX_RATE_LIMIT), perMs: whole(`${option}.perMs`, perMs, MAX_RATE_WINDOW_MS) };
  if (perKey === undefined) return limit;
  if (perKey !== true && typeof perKey !== 'function')
    throw new InvalidOptionError(
      `${option}.perKey`,
      `must be true (the partition key) or a function (payload, headers) => key, got ${shown(perKey)}`,
    );
  return { ...limit, perKey: perKey as true | RateLimitKeyOf };
}

function whole(option: string, value: unknown, most: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > most)
    throw new InvalidOptionError(option, `must be a whole number from 1 to ${most}, got ${shown(value)}`);
  return value;
}
