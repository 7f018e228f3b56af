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

/** Most tries of {@link sameSlotKey}'s search; 16384 slots make a hit within a few tens of thousands. */
const SEARCH_LIMIT = 1_000_000;

/**
 * `key` + `suffix`, in `key`'s slot: `orders{x}:dead` (a hash tag stays the first one),
 * `{orders}:dead` (the key becomes the tag), or, for a key whose braces make neither possible
 * (`x{}y`, `a}b`: hashed whole, and no tag can hold a `}`), the first `<key><suffix>:<n>` that
 * hashes to the same slot.
 */
export function sameSlotKey(key: string, suffix: string): string {
  if (hashTagOf(key) !== undefined) return `${key}${suffix}`;
  if (!key.includes('}')) return `{${key}}${suffix}`;
  const slot = slotOf(key);
  for (let n = 0; n < SEARCH_LIMIT; n++) {
    const candidate = `${key}${suffix}:${n}`;
    if (slotOf(candidate) === slot) return candidate;
  }
  throw new Error(`no key "${key}${suffix}:<n>" in the slot of "${key}"`);
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
