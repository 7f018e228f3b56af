import type { Redis } from 'ioredis';

/**
 * `n` plain entries (`n <i>`) in `<prefix>orders`, with group `g` created first, written before
 * any consumer starts: a backlog its first reads fetch in full batches. Returns their ids in order.
 */
export async function preloadOrders(r: Redis, prefix: string, n: number): Promise<string[]> {
  const key = `${prefix}orders`;
  await r.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  return ids;
}
