/**
 * Reclaim on the park's read (XREADGROUP … CLAIM, Redis 8.4+): a dead peer's idle entries come
 * with the read, with exact delivery counts, past maxDeliveries to the dead letters, deleted ones
 * still reported (by the rarer sweep). The same scenes on a server without CLAIM, or with
 * `newerCommands: false`, show the fallback: XAUTOCLAIM, as before.
 */
import { createGroup } from './support/backlog.js';
import { parseInfo } from './support/redis-info.js';
import { serverFeatures } from './support/server-features.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/** Long enough that no sweep falls within a test, however slow the machine: only the read can claim. */
const MIN_IDLE_MS = 120_000;

/** The live consumer on `prefix` (blockMs 100, minIdleMs MIN_IDLE_MS: only the read claims), `options` over those. */
const startLive = (prefix: string, options: Partial<Parameters<typeof start>[0]> = {}) =>
  start({ connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 100, minIdleMs: MIN_IDLE_MS, ...options });

/** `n` entries in `key` delivered to a dead consumer, made idle for ten minutes with `deliveries` deliveries each (XCLAIM IDLE … RETRYCOUNT). */
async function deadPeerEntries(key: string, n: number, deliveries: number, { groupExists = false } = {}): Promise<string[]> {
  const r = redis.client();
  if (!groupExists) await createGroup(r, key);
  // One transaction: a live consumer parked on the stream is served after it, so the dead one reads them all.
  const tx = r.multi();
  for (let i = 0; i < n; i++) tx.xadd(key, '*', 'data', JSON.stringify({ n: i }));
  tx.xreadgroup('GROUP', 'g', 'dead', 'COUNT', n, 'STREAMS', key, '>');
  const ids = ((await tx.exec()) ?? []).slice(0, n).map(([, id]) => String(id));
  await r.xclaim(key, 'g', 'dead', 0, ...ids, 'IDLE', 10 * MIN_IDLE_MS, 'RETRYCOUNT', deliveries, 'JUSTID');
  return ids;
}

/** XAUTOCLAIM and XREADGROUP calls the server has served (this file's server: its tests run one at a time). */
async function calls(): Promise<{ autoClaims: number; reads: number }> {
  const stats = parseInfo(await redis.client().info('commandstats'));
  const of = (command: string) => Number(/calls=(\d+)/.exec(stats[`cmdstat_${command}`] ?? '')?.[1] ?? 0);
  return { autoClaims: of('xautoclaim'), reads: of('xreadgroup') };
}

describe('reclaim on the read (XREADGROUP … CLAIM) or by XAUTOCLAIM, whichever the server offers', () => {
  for (const newerCommands of [true, false]) {
    it(`takes a dead peer's idle entries with exact delivery counts (newerCommands: ${newerCommands})`, async (ctx) => {
      if (!redis.owned) ctx.skip(); // counts calls server-wide
      const byRead = newerCommands && (await serverFeatures(redis)).claimOnRead;
      const prefix = uniquePrefix();
      const key = `${prefix}orders`;
      const started = await calls();
      const app = await startLive(prefix, { newerCommands });
      // The sweep a start runs at once is over: what idles from now on is the read's to claim, or the next sweep's.
      await waitFor(async () => (await calls()).autoClaims > started.autoClaims, { message: 'the first sweep' });
      const before = await calls();
      const ids = await deadPeerEntries(key, 5, 2, { groupExists: true });
      await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 5, { message: 'the five entries acked' });
      // Their third delivery, exactly: two before (RETRYCOUNT), this one.
      expect(app.recorder.calls.map((c) => [c.id, c.deliveryCount]).sort()).toEqual(ids.map((id) => [id, 3]).sort());
      expect(app.settled.map((e) => e.source)).toEqual(['reclaim', 'reclaim', 'reclaim', 'reclaim', 'reclaim']);
      expect(await redis.client().xpending(key, 'g')).toEqual([0, null, null, null]);
      const after = await calls();
      if (byRead) {
        // Taken by the read: no sweep ran since the first (the next comes a minIdleMs later).
        expect(after.autoClaims - before.autoClaims).toBe(0);
      } else {
        expect(after.autoClaims - before.autoClaims).toBeGreaterThan(0);
      }
    });
  }

  it('dead-letters an entry delivered past maxDeliveries without running its handler', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const [id] = await deadPeerEntries(key, 1, 3);
    const app = await startLive(prefix, { maxDeliveries: 3 });
    await waitFor(async () => (await redis.client().xlen(`${key}:dead`)) === 1, { message: 'the entry dead-lettered' });
    const [letterEntry] = await redis.client().xrange(`${key}:dead`, '-', '+');
    const fields = letterEntry![1];
    const letter = new Map(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]] as const] : [])));
    expect([letter.get('sourceId'), letter.get('deliveryCount')]).toEqual([id, '4']);
    expect(app.recorder.calls).toEqual([]);
    expect(await redis.client().xpending(key, 'g')).toEqual([0, null, null, null]);
  });

  it('reports a dead peer’s entry deleted while pending (the read skips it; the sweep drops and names it)', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const [gone, kept] = await deadPeerEntries(key, 2, 1);
    await redis.client().xdel(key, gone!);
    // A short minIdleMs: the sweep that finds deleted entries runs once per minIdleMs where the read claims.
    const app = await startLive(prefix, { minIdleMs: 300 });
    await waitFor(() => app.deleted.includes(gone!), { message: 'the deleted entry reported' });
    await waitFor(() => app.recorder.idsOf('orders').includes(kept!), { message: 'the live entry handled' });
    await waitFor(async () => ((await redis.client().xpending(key, 'g')) as [number])[0] === 0, { message: 'the PEL empty' });
  });

  it('lets a new entry through between claimed batches: a large dead PEL does not hold it back', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await deadPeerEntries(key, 200, 1);
    const app = await startLive(prefix, { batchSize: 10 });
    const r = redis.client();
    let fresh: Promise<string | null> | undefined;
    // On the same stream: COUNT is per stream, so one on another stream would come with the claimed ones anyway.
    app.recorder.behavior = () => void (fresh ??= r.xadd(key, '*', 'data', '"fresh"'));
    await waitFor(() => app.recorder.calls.some((c) => c.payload === 'fresh'), { message: 'the new entry handled' });
    const freshId = await fresh!;
    // One read claims a batch (COUNT per stream); the next is a plain one, where the new entry is.
    expect(app.recorder.calls.findIndex((c) => c.id === freshId)).toBeLessThanOrEqual(3 * 10);
    await waitFor(() => app.settled.length === 201, { message: 'everything settled' });
  });
});
