import { atMost, InvalidOptionError, positiveInt, rejectUnknown } from './validate.js';

/** How often the consumer cleanup runs by default: often enough to keep XINFO CONSUMERS short, rarely enough to cost nothing. */
export const CONSUMER_CLEANUP_INTERVAL_MS = 300_000;

/** The longest delay a Node timer takes. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export function consumerCleanup(value: unknown): { idleMs: number; intervalMs: number } | false {
  if (value === undefined || value === false) return false;
  if (typeof value !== 'object' || value === null)
    throw new InvalidOptionError('consumerCleanup', 'must be { idleMs, intervalMs? } or false');
  rejectUnknown(value, ['idleMs', 'intervalMs'], 'consumerCleanup.');
  const { idleMs, intervalMs } = value as { idleMs?: unknown; intervalMs?: unknown };
  if (idleMs === undefined)
    throw new InvalidOptionError('consumerCleanup.idleMs', 'is required: how long a consumer must be idle to be deleted');
  // Node runs a timer of more than 2^31 - 1 ms after 1 ms: a longer interval would clean in a busy loop.
  return {
    idleMs: positiveInt('consumerCleanup.idleMs', idleMs, 0),
    intervalMs: atMost(
      'consumerCleanup.intervalMs',
      positiveInt('consumerCleanup.intervalMs', intervalMs, CONSUMER_CLEANUP_INTERVAL_MS),
      MAX_TIMER_MS,
    ),
  };
}
