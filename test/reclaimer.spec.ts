/** Reclaim rounds against a real Redis, with the test's own handler: what a round takes, a sweep's rounds, and what it leaves alone. */
import { lastValueFrom, toArray } from 'rxjs';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { createGroup } from './support/backlog.js';
import { pendingIds, pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { addEntries, useUnitLoops } from './support/unit-loop.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const loops = useUnitLoops(redis);
const HOUR = 3_600_000;
const MIN_IDLE_MS = 1000;

/** `n` entries of `key` delivered to `consumer` (a dead peer by default), never acked, idle an hour. */
async function idlePel(key: string, n: number, consumer = 'dead'): Promise<string[]> {
  const r = redis.client();
  await createGroup(r, key).catch(() => undefined);
  const ids = await addEntries(r, key, n);
  await r.xreadgroup('GROUP', 'g', consumer, 'COUNT', n, 'STREAMS', key, '>');
  await r.xclaim(key, 'g', consumer, 0, ...ids, 'IDLE', HOUR, 'JUSTID');
  return ids;
}

function reclaimer(streams: string[], batchSize = 2) {
  const loop = loops.open({ streams, options: { batchSize, minIdleMs: MIN_IDLE_MS, blockMs: 60_000 } });
  const r = loop.reclaimer();
  return { loop, reclaimer: r, step: () => lastValueFrom(r.step$.pipe(toArray())) };
}

describe('Reclaimer: one round', () => {
  it('claims entries idle past minIdleMs, one batch at most over every stream, and settles them as reclaimed', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    const idle = [...(await idlePel(a, 3)), ...(await idlePel(b, 3))];
    // A live peer's entry, not idle: not for the taking.
    await addEntries(redis.client(), a, 1);
    await redis.client().xreadgroup('GROUP', 'g', 'live', 'COUNT', 1, 'STREAMS', a, '>');
    const { loop, step } = reclaimer([a, b]);
    expect(await step()).toEqual([{ step: 'reclaim', fetched: 2 }]);
    expect(loop.calls).toHaveLength(2);
    expect(loop.calls.every((c) => c.endsWith(' reclaim') && idle.includes(c.split(' ')[0]!))).toBe(true);
    await loop.acks.flush();
    expect(loop.settled.map((e) => e.outcome)).toEqual(['acked', 'acked']);
    expect((await pendingIds(redis, a)).length + (await pendingIds(redis, b)).length).toBe(5);
  });

  it('does not settle again entries this consumer already holds (a read-ahead whose lease lapsed): the batch that holds them does', async () => {
    const key = `${uniquePrefix()}orders`;
    const ids = await idlePel(key, 2, 'c');
    const { loop, step } = reclaimer([key]);
    const held: StreamEntry[] = ids.map((id) => ({ stream: key, id, fields: ['n', '0'], deliveryCount: 1 }));
    loop.custody.received(held, performance.now());
    expect(await step()).toEqual([{ step: 'reclaim', fetched: 0 }]);
    expect(loop.calls).toEqual([]);
    expect(loop.custody.heldIds()).toEqual(new Map([[key, ids]]));
  });

  it('a stream failing mid-round (its group gone): what the streams before it claimed is settled first, then the round fails', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    const ids = await idlePel(a, 2);
    // b exists without the group: its XAUTOCLAIM answers NOGROUP after a's has taken effect.
    await redis.client().xadd(b, '*', 'n', '0');
    const { loop, step } = reclaimer([a, b], 10);
    await expect(step()).rejects.toThrow(/NOGROUP/);
    expect(loop.calls).toEqual(ids.map((id) => `${id} reclaim`));
  });

  it('pending entries deleted from the stream are reported as deleted, never handled, and gone from the pending list', async () => {
    const key = `${uniquePrefix()}orders`;
    const ids = await idlePel(key, 3);
    await redis.client().xdel(key, ids[1]!);
    const { loop, step } = reclaimer([key], 10);
    await step();
    expect(loop.deleted).toEqual([[key, [ids[1]]]]);
    expect(loop.calls).toEqual([ids[0], ids[2]].map((id) => `${id} reclaim`));
    await loop.acks.flush();
    expect(await pendingRows(redis, key)).toEqual([]);
  });
});

describe('Reclaimer: a sweep', () => {
  afterEach(() => vi.useRealTimers());

  it('goes round after round (busy meanwhile) until every idle entry is taken, each once; the next sweep waits blockMs', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    const idle = [...(await idlePel(a, 5)), ...(await idlePel(b, 4))];
    const { loop, reclaimer: r, step } = reclaimer([a, b]);
    expect(r.due).toBe(true);
    let rounds = 0;
    do {
      const fetched = (await step()).reduce((n, s) => n + s.fetched, 0);
      expect(fetched).toBeLessThanOrEqual(2);
      rounds++;
    } while (r.busy && rounds < 50);
    expect(loop.calls.map((c) => c.split(' ')[0]).sort()).toEqual([...idle].sort());
    expect(rounds).toBeGreaterThanOrEqual(5);
    // Swept: nothing to do within blockMs, even with a new idle entry.
    const [late] = await idlePel(a, 1);
    expect([r.busy, r.due]).toEqual([false, false]);
    expect(await step()).toEqual([]);
    // blockMs later (Date alone is faked: Redis and the connections keep real timers).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    vi.setSystemTime(Date.now() + 60_000);
    expect(r.due).toBe(true);
    expect(await step()).toEqual([{ step: 'reclaim', fetched: 1 }]);
    expect(loop.calls.at(-1)).toBe(`${late} reclaim`);
  });
});
