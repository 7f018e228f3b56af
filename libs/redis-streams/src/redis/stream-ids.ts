/** Stream ids (`ms-seq`) as the transport compares and reads them. */

/** The ms part of a stream id: when the entry was added (for auto-generated ids). */
export function idTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

/** Ids before 2000 or in the future are not times (explicit ids such as `1-1`). */
const PLAUSIBLE_SINCE = Date.UTC(2000, 0, 1);

/** Ms since the entry `id` was added, by its id; null when the id is no time. */
export function idAge(id: string, now: number): number | null {
  const born = idTime(id);
  return born >= PLAUSIBLE_SINCE && born <= now ? now - born : null;
}

/** Orders two stream ids (`ms-seq`) numerically: by length, then by text, of each part (no BigInt: the hot path calls it). */
export function compareIds(a: string, b: string): number {
  const da = a.indexOf('-');
  const db = b.indexOf('-');
  return compareDecimal(a.slice(0, da), b.slice(0, db)) || compareDecimal(a.slice(da + 1), b.slice(db + 1));
}

function compareDecimal(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
