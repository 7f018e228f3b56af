import { Logger } from '@nestjs/common';
import { Lease } from '../libs/redis-streams/src/consumer/custody/lease.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup } from './support/backlog.js';

const redis = useRedis();

type PendingRow = [id: string, consumer: string, idleMs: number, deliveries: number];

/** `n` entries delivered to consumer `c` and never acked, all made to look idle for an hour. */
async function heldEntries(key: string, n: number): Promise<StreamEntry[]> {
  const r = redis.client();
  await createGroup(r, key);
  for (let done = 0; done < n; done += 5000) {
    const pipeline = r.pipeline();
    for (let i = done; i < Math.min(n, done + 5000); i++) pipeline.xadd(key, '*', 'n', String(i));
    await pipeline.exec();
  }
  await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', n, 'STREAMS', key, '>');
  const ids = ((await r.xpending(key, 'g', '-', '+', n)) as PendingRow[]).map(([id]) => id);
  for (let i = 0; i < ids.length; i += 5000) await r.xclaim(key, 'g', 'c', 0, ...ids.slice(i, i + 5000), 'IDLE', 3_600_000, 'JUSTID');
  return ids.map((id) => ({ stream: key, id, fields: [], deliveryCount: 1 }));
}

describe('lease renewal', () => {
  it('renews 20,000 held ids of one stream (more than one Lua call can unpack)', async () => {
    const key = `${uniquePrefix()}orders`;
    const entries = await heldEntries(key, 20_000);
    const conn = redis.client();
    const warnings: string[] = [];
    const logger = new Logger('lease-test');
    logger.warn = (message: unknown) => void warnings.push(String(message));
    const lease = new Lease(new StreamCommands(conn, 'g'), 'c', 50, logger);
    lease.hold(entries, performance.now());
    const renewing = lease.renewals$.subscribe();
    try {
      // Renewed: every one idle far below the hour it started at, and still c's with one delivery.
      await waitFor(async () => ((await conn.xpending(key, 'g', '-', '+', 20_000)) as PendingRow[]).every(([, , idle]) => idle < 60_000), {
        message: 'all 20,000 leases renewed',
      });
      const rows = (await conn.xpending(key, 'g', '-', '+', 20_000)) as PendingRow[];
      expect(rows).toHaveLength(20_000);
      expect(rows.every(([, consumer, , deliveries]) => consumer === 'c' && deliveries === 1)).toBe(true);
      expect(warnings).toEqual([]);
    } finally {
      renewing.unsubscribe();
    }
    // A bound for a hang, not a speed: 20,000 ids took 2 s alone and 21 s beside CI's other lanes.
  }, 300_000);

  it('hands back 20,000 held ids at once', async () => {
    const key = `${uniquePrefix()}orders`;
    const entries = await heldEntries(key, 20_000);
    const conn = redis.client();
    await conn.xclaim(key, 'g', 'c', 0, entries[0]!.id, 'IDLE', 0, 'JUSTID');
    const lease = new Lease(new StreamCommands(conn, 'g'), 'c', 60_000, new Logger('lease-test'));
    lease.hold(entries, performance.now());
    await lease.handBack(entries, 7_200_000);
    const rows = (await conn.xpending(key, 'g', '-', '+', 20_000)) as PendingRow[];
    expect(rows.every(([, , idle]) => idle >= 7_200_000)).toBe(true);
    expect(lease.entries()).toEqual([]);
  }, 300_000);
});
