import type { TestRedis } from './redis-server.js';

/** One row of XPENDING key group - + count: the entry, who holds it, for how long, how often delivered. */
export type PendingRow = [id: string, consumer: string, idleMs: number, deliveries: number];

/** How many entries the group's PEL holds (XPENDING's summary), over all its consumers. */
export const pendingCount = async (redis: TestRedis, key: string, group = 'g'): Promise<number> =>
  Number(((await redis.client().xpending(key, group)) as unknown[])[0]);

/** The group's pending entries, oldest first; with `consumer`, only the ones that consumer holds. */
export const pendingRows = async (
  redis: TestRedis,
  key: string,
  { group = 'g', consumer }: { group?: string; consumer?: string } = {},
): Promise<PendingRow[]> =>
  (await (consumer
    ? redis.client().xpending(key, group, '-', '+', 10_000, consumer)
    : redis.client().xpending(key, group, '-', '+', 10_000))) as PendingRow[];

/** The ids of pendingRows(). */
export const pendingIds = async (redis: TestRedis, key: string, options?: { group?: string; consumer?: string }): Promise<string[]> =>
  (await pendingRows(redis, key, options)).map(([id]) => id);
