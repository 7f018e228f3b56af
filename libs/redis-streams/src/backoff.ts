/**
 * The library's one retry delay after a failed Redis call: `initialMs` for the first retry (attempt 1),
 * doubling per further failure, capped at `maxMs`.
 */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** (attempt - 1));
}
