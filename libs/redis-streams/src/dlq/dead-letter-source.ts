import { sameSlotKey } from '../slots.js';

const SUFFIX = ':dead';

/**
 * The streams whose dead-letter stream, under the default names, is `dead`: `orders:dead` is
 * `orders`' (one node, or a hash-tagged key on a cluster), `{orders}:dead` is `orders`' on a
 * cluster and `{orders}`'s on one node. Derived from the key alone, never from a letter's content.
 * Empty when no default name gives `dead` (a custom `deadLetterStream`).
 */
export function deadLetterSources(dead: string): string[] {
  const sources = new Set<string>();
  if (dead.endsWith(SUFFIX) && dead.length > SUFFIX.length) sources.add(dead.slice(0, -SUFFIX.length));
  const tagged = /^\{([^}]+)\}:dead$/.exec(dead)?.[1];
  if (tagged !== undefined && sameSlotKey(tagged, SUFFIX) === dead) sources.add(tagged);
  // A key whose braces allow no tag (`a}b`) gets `a}b:dead:<n>`, the first such name in its slot.
  const searched = /^(.*\}.*):dead:\d+$/s.exec(dead)?.[1];
  if (searched !== undefined && sameSlotKey(searched, SUFFIX) === dead) sources.add(searched);
  return [...sources];
}
