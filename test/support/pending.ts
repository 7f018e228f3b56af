import { parseGroupInfo } from '../../libs/redis-streams/src/redis/replies/info-replies.js';
import type { TestRedis } from './redis-server.js';
import { waitFor } from './wait-for.js';

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

/**
 * The group exists, has delivered the stream's last entry and holds nothing pending. Nothing more is on
 * its way only if no consumer still owes a failed entry outside the PEL: one whose group was destroyed
 * and re-created above it is re-owned by its consumer's next owed-entry check (group-storm waits that out).
 */
export async function isQuiesced(redis: TestRedis, key: string, group = 'g'): Promise<boolean> {
  const r = redis.client();
  const info = parseGroupInfo(await r.xinfo('GROUPS', key).catch(() => []), group);
  const [[lastId] = []] = await r.xrevrange(key, '+', '-', 'COUNT', 1);
  return info !== undefined && info.lastDeliveredId === lastId && info.pending === 0;
}

/** Waits for isQuiesced: call it once every expected retry has run (see above). */
export const quiesced = (redis: TestRedis, key: string, group = 'g'): Promise<void> =>
  waitFor(() => isQuiesced(redis, key, group), { message: 'every entry delivered and settled' }).then(() => undefined);
