import { InvalidOptionError, rejectUnknown, shown } from './validate.js';

/** Longest retry delay a policy may give: a day (longer waits belong in a scheduler, not a PEL). */
export const MAX_RETRY_DELAY_MS = 86_400_000;

/**
 * When a failed entry is tried again, in BullMQ's words. `fixed`: `delayMs` after every failure.
 * `exponential`: `delayMs × 2^(delivery − 1)` (1 s, 2 s, 4 s … for `delayMs: 1000`), capped at
 * `maxDelayMs`. `jitter` (0 to 1) takes up to that share off each delay at random, so entries
 * that failed together do not all come back together. A function gets the delivery that failed
 * (Redis' count, from 1) and the handler's error, and returns the delay in ms.
 */
export type RetryBackoff =
  | { type: 'fixed' | 'exponential'; delayMs: number; maxDelayMs?: number; jitter?: number }
  | ((deliveryCount: number, error: unknown) => number);

/**
 * `retry` of the server (every pattern) or of one `@StreamPattern`. How many deliveries an entry
 * gets is `maxDeliveries` (BullMQ's `attempts`): on the last one a failure dead-letters it.
 */
export interface RetryPolicy {
  backoff: RetryBackoff;
}

/** A resolved policy: the delay in ms before the next try of an entry whose delivery `deliveryCount` failed. */
export type RetryDelay = (deliveryCount: number, error: unknown) => number;

/** `retry`, validated: undefined when unset (a failed entry then returns once idle `minIdleMs − leaseRenewMs`). */
export function resolveRetry(option: string, value: unknown): RetryDelay | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(option, 'must be { backoff }');
  rejectUnknown(value, ['backoff'], `${option}.`);
  const { backoff } = value as { backoff?: unknown };
  const where = `${option}.backoff`;
  if (typeof backoff === 'function') return backoff as RetryDelay;
  if (typeof backoff !== 'object' || backoff === null)
    throw new InvalidOptionError(
      where,
      "must be { type: 'fixed' | 'exponential', delayMs, maxDelayMs?, jitter? } or (deliveryCount, error) => ms",
    );
  rejectUnknown(backoff, ['type', 'delayMs', 'maxDelayMs', 'jitter'], `${where}.`);
  const { type, delayMs, maxDelayMs, jitter } = backoff as Record<string, unknown>;
  if (type !== 'fixed' && type !== 'exponential') throw new InvalidOptionError(`${where}.type`, `must be 'fixed' or 'exponential'`);
  const base = delay(`${where}.delayMs`, delayMs);
  const max = maxDelayMs === undefined ? MAX_RETRY_DELAY_MS : delay(`${where}.maxDelayMs`, maxDelayMs);
  if (max < base) throw new InvalidOptionError(`${where}.maxDelayMs`, `must be at least delayMs (${base}), got ${max}`);
  if (jitter !== undefined && (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)))
    throw new InvalidOptionError(`${where}.jitter`, `must be a number from 0 to 1, got ${shown(jitter)}`);
  const share = (jitter as number | undefined) ?? 0;
  return (deliveryCount) => {
    const raw = type === 'fixed' ? base : base * 2 ** Math.min(Math.max(0, deliveryCount - 1), 40);
    const capped = Math.min(raw, max);
    return Math.round(share === 0 ? capped : capped * (1 - share * Math.random()));
  };
}

function delay(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_RETRY_DELAY_MS) {
    throw new InvalidOptionError(option, `must be an integer from 0 to ${MAX_RETRY_DELAY_MS} (ms), got ${shown(value)}`);
  }
  return value;
}

/** A delay a policy function or a RetryLaterException (RateLimitedException) gave, checked: finite and from 0, rounded to whole ms, at most a day; else why not. */
export function checkedDelay(value: unknown): number | string {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    return `a retry delay must be a finite number of ms, at least 0; got ${typeof value === 'number' ? String(value) : shown(value)}`;
  return Math.min(Math.round(value), MAX_RETRY_DELAY_MS);
}
