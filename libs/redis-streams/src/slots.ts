import calculateSlot from 'cluster-key-slot';

/** Redis Cluster's hash slots: every key maps to one of 16384, by its hash tag when it has one. */
export const SLOT_COUNT = 16384;

/** The slot of `key`, as Redis and ioredis compute it (CRC16 of the hash tag, or of the whole key). */
export function slotOf(key: string): number {
  return calculateSlot(key);
}

/** The key's hash tag: what is between the first `{` and the next `}`, when not empty. */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** Keys grouped by slot, in first-seen order: each group may share one multi-key command. */
export function groupBySlot(keys: readonly string[]): string[][] {
  const groups = new Map<number, string[]>();
  for (const key of keys) {
    const slot = slotOf(key);
    const group = groups.get(slot);
    if (group) group.push(key);
    else groups.set(slot, [key]);
  }
  return [...groups.values()];
}
