import { InvalidOptionError, rejectUnknown, shown } from './validate.js';

/**
 * `@StreamPattern(p, { priorities })`: a record's `priority` (0, the default, to `levels - 1`) picks the stream it
 * is written to; higher levels are read first, and every `lowerEvery`-th read leads with a level below the top, so
 * that a steady load of the top level does not starve the others (docs/guide/priorities.md).
 */
export interface Priorities {
  /** How many levels: 2 to 10. Level 0 is the pattern's own stream (what a record without a priority is). */
  levels: number;
  /**
   * The guard against starvation: every `lowerEvery`-th read starts at a level below the top (taking turns among
   * them), then reads the others from the top down. 2 to 1,000. Default: 10.
   */
  lowerEvery?: number;
}

/** Most levels a pattern may declare, and so the highest `priority` a record may carry plus one. */
export const MAX_PRIORITY_LEVELS = 10;
export const DEFAULT_LOWER_EVERY = 10;
const MAX_LOWER_EVERY = 1000;

/** A pattern's `priorities`, validated (each part named in the error); undefined when absent. */
export function resolvePriorities(option: string, value: unknown): Required<Priorities> | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null)
    throw new InvalidOptionError(option, `must be { levels, lowerEvery? }, got ${shown(value)}`);
  rejectUnknown(value, ['levels', 'lowerEvery'], `${option}.`);
  const { levels, lowerEvery } = value as { levels?: unknown; lowerEvery?: unknown };
  if (typeof levels !== 'number' || !Number.isInteger(levels) || levels < 2 || levels > MAX_PRIORITY_LEVELS)
    throw new InvalidOptionError(`${option}.levels`, `must be a whole number from 2 to ${MAX_PRIORITY_LEVELS}, got ${shown(levels)}`);
  if (
    lowerEvery !== undefined &&
    (typeof lowerEvery !== 'number' || !Number.isInteger(lowerEvery) || lowerEvery < 2 || lowerEvery > MAX_LOWER_EVERY)
  )
    throw new InvalidOptionError(`${option}.lowerEvery`, `must be a whole number from 2 to ${MAX_LOWER_EVERY}, got ${shown(lowerEvery)}`);
  return { levels, lowerEvery: (lowerEvery as number | undefined) ?? DEFAULT_LOWER_EVERY };
}

/** A record's `priority`: a whole number from 0 to MAX_PRIORITY_LEVELS - 1 (0: none). Throws a TypeError naming it. */
export function checkPriority(priority: unknown): number {
  if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < 0 || priority >= MAX_PRIORITY_LEVELS)
    throw new TypeError(`priority must be a whole number from 0 to ${MAX_PRIORITY_LEVELS - 1}, got ${shown(priority)}`);
  return priority;
}
