import type { Redis } from 'ioredis';
import { uniquePrefix } from './test-app.js';

/**
 * `n` plain entries (`n <i>`) in `<prefix>orders`, with group `g` created first, written before
 * any consumer starts: a backlog its first reads fetch in full batches. Returns their ids in order.
 */
export async function preloadOrders(r: Redis, prefix: string, n: number): Promise<string[]> {
  const key = `${prefix}orders`;
  await createGroup(r, key);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  return ids;
}

/** Creates `group` on `key` from its first entry (the stream too, if missing): what a consumer's start-up would do. */
export async function createGroup(r: Redis, key: string, group = 'g'): Promise<void> {
  await r.xgroup('CREATE', key, group, '0', 'MKSTREAM');
}

/**
 * A stream of the test's own, `<unique prefix><pattern>`, with `group` created on it, still empty: what a
 * test fills and reads by hand before any consumer starts. Returns the prefix (for the consumer's keyPrefix) and the key.
 */
export async function groupOnNewStream(r: Redis, pattern = 'orders', group = 'g'): Promise<{ prefix: string; key: string }> {
  const prefix = uniquePrefix();
  const key = `${prefix}${pattern}`;
  await createGroup(r, key, group);
  return { prefix, key };
}
