/**
 * Read-ahead and hand-back, written once (read-ahead.ts) and kept by each fetch step (the park:
 * parker.ts; self-drain: self-drain.ts), against a real Redis with the test's own handler. The same promises for both:
 * the next read is out while a batch is handled and its entries are held from arrival; stopping
 * hands an unstarted read-ahead batch back to the group at once; abandoning leaves it to abandon().
 */
import { firstValueFrom, lastValueFrom, toArray } from 'rxjs';
import { ReadAhead } from '../libs/redis-streams/src/consumer/read/read-ahead.js';
import { StopSignal } from '../libs/redis-streams/src/consumer/stop-signal.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { within } from '../libs/redis-streams/src/within.js';
import { createGroup } from './support/backlog.js';
import { pendingIds, pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { gate } from './support/gate.js';
import { addEntries, useUnitLoops, type UnitLoop } from './support/unit-loop.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const loops = useUnitLoops(redis);
const MIN_IDLE_MS = 60_000;

const heldOn = (loop: UnitLoop, key: string) => loop.custody.counts().get(key) ?? 0;
const rowsOf = async (key: string) => new Map((await pendingRows(redis, key)).map(([id, consumer, idle]) => [id, { consumer, idle }]));

/** A handler whose first call waits until the test opens the gate. */
function firstCallWaits() {
  const g = gate();
  let calls = 0;
  return { open: g.open, handle: async () => (calls++ === 0 ? await g.wait : undefined, 'acked' as const) };
}

describe('the park (Parker): read-ahead', () => {
  async function parked(entries: number, options: { batchSize: number; blockMs?: number }, handle?: () => Promise<'acked'>) {
    const key = `${uniquePrefix()}orders`;
    await createGroup(redis.client(), key);
    const ids = await addEntries(redis.client(), key, entries);
    const loop = loops.open({ streams: [key], options: { blockMs: 2000, minIdleMs: MIN_IDLE_MS, ...options }, handle });
    const parker = loop.parker();
    return { key, ids, loop, parker, step: () => firstValueFrom(parker.step$) };
  }

  it('after a full batch, sends the next park at once and holds what it brings while the batch is handled; the next park takes it', async () => {
    const gated = firstCallWaits();
    const { key, ids, loop, step } = await parked(5, { batchSize: 2 }, gated.handle);
    const first = step();
    // Two in hand, two more read ahead: all four delivered to c and held.
    await waitFor(async () => (await pendingIds(redis, key, { consumer: 'c' })).length === 4 && heldOn(loop, key) === 4, {
      message: 'the read-ahead batch delivered and held',
    });
    expect(loop.calls).toEqual([`${ids[0]} new`]);
    gated.open();
    expect(await first).toEqual({ step: 'park', fetched: 2 });
    expect(await step()).toEqual({ step: 'park', fetched: 2 });
    expect(await step()).toEqual({ step: 'park', fetched: 1 });
    await loop.acks.flush();
    expect(loop.calls).toEqual(ids.map((id) => `${id} new`));
    expect(await pendingIds(redis, key)).toEqual([]);
  });

  it('stopping while a batch is handled: the read-ahead batch goes back to the group at once (idle minIdleMs), unhandled', async () => {
    const gated = firstCallWaits();
    const { key, ids, loop, step } = await parked(3, { batchSize: 1 }, gated.handle);
    const first = step();
    await waitFor(async () => (await pendingIds(redis, key, { consumer: 'c' })).length === 2, { message: 'the read-ahead delivered' });
    loop.stop.stop('stopping');
    gated.open();
    expect(await first).toEqual({ step: 'park', fetched: 1 });
    await loop.acks.flush();
    const rows = await rowsOf(key);
    // The one in hand finished and was acked; the read-ahead one is a peer's on its next beat; the third was never read.
    expect([...rows.keys()]).toEqual([ids[1]]);
    expect(rows.get(ids[1]!)!.idle).toBeGreaterThanOrEqual(MIN_IDLE_MS);
    expect(loop.calls).toEqual([`${ids[0]} new`]);
    expect(loop.custody.entries()).toEqual([]);
  });

  it('abandoned while a batch is handled: the read-ahead batch is left held for abandon() to hand back, no command of its own', async () => {
    const gated = firstCallWaits();
    const { key, ids, loop, step } = await parked(2, { batchSize: 1 }, gated.handle);
    const first = step();
    await waitFor(() => heldOn(loop, key) === 2, { message: 'the read-ahead held' });
    loop.stop.stop('abandoned');
    gated.open();
    await first;
    expect(loop.custody.heldIds()).toEqual(new Map([[key, [ids[0], ids[1]]]]));
    expect((await rowsOf(key)).get(ids[1]!)!.idle).toBeLessThan(MIN_IDLE_MS);
  });

  it('dropAhead (before a restart): the read-ahead result is dropped, its entries left pending for self-drain; the next park reads anew', async () => {
    const { key, ids, loop, parker, step } = await parked(2, { batchSize: 1 });
    expect(await step()).toEqual({ step: 'park', fetched: 1 });
    await waitFor(() => heldOn(loop, key) === 1 && loop.custody.heldOn(key).has(ids[1]!), { message: 'the read-ahead held' });
    await parker.dropAhead();
    const [fresh] = await addEntries(redis.client(), key, 1);
    expect(await step()).toEqual({ step: 'park', fetched: 1 });
    expect(loop.calls).toEqual([`${ids[0]} new`, `${fresh} new`]);
    expect(await pendingIds(redis, key, { consumer: 'c' })).toContain(ids[1]);
    await parker.dropAhead();
  });

  it('dropAhead wakes a read-ahead still parked on an empty stream rather than wait out blockMs', async () => {
    const { loop, parker, step } = await parked(1, { batchSize: 1, blockMs: 20_000 });
    expect(await step()).toEqual({ step: 'park', fetched: 1 });
    // The read-ahead is blocked at the server (CLIENT UNBLOCK can reach it only then).
    const parkedHere = async () =>
      String(await redis.client().client('LIST'))
        .split('\n')
        .some((line) => line.includes(`name=${loop.name}:blocking `) && / flags=b /.test(line));
    await waitFor(parkedHere, { message: 'the read-ahead parked' });
    expect(
      await within(
        parker.dropAhead().then(() => 'dropped'),
        10_000,
        'still parked',
      ),
    ).toBe('dropped');
  });
});

describe('self-drain: own pending entries, with read-ahead', () => {
  /** `pending` entries of `key` delivered to c and not acked, and one new entry nobody read. */
  async function ownPel(pending: number, key = `${uniquePrefix()}orders`) {
    const r = redis.client();
    await createGroup(r, key);
    const ids = await addEntries(r, key, pending);
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', pending, 'STREAMS', key, '>');
    const [fresh] = await addEntries(r, key, 1);
    return { key, ids, fresh: fresh! };
  }

  it('settles its own pending entries oldest first, read by read, until a read comes back empty; new entries are not its', async () => {
    const { key, ids, fresh } = await ownPel(5);
    const loop = loops.open({ streams: [key], options: { batchSize: 2, minIdleMs: MIN_IDLE_MS } });
    const steps = await lastValueFrom(loop.selfDrain$().pipe(toArray()));
    expect(steps.map((s) => s.fetched)).toEqual([2, 2, 1, 0]);
    expect(steps.every((s) => s.step === 'drain')).toBe(true);
    expect(loop.calls).toEqual(ids.map((id) => `${id} drain`));
    expect(loop.calls.join()).not.toContain(fresh);
    await loop.acks.flush();
    expect(await pendingIds(redis, key)).toEqual([]);
  });

  it('over several streams, a stream drops out once it reads back empty while the others go on', async () => {
    const prefix = uniquePrefix();
    const a = await ownPel(3, `${prefix}a`);
    const b = await ownPel(1, `${prefix}b`);
    const loop = loops.open({ streams: [a.key, b.key], options: { batchSize: 2, minIdleMs: MIN_IDLE_MS } });
    await lastValueFrom(loop.selfDrain$().pipe(toArray()));
    expect(loop.calls.sort()).toEqual([...a.ids, ...b.ids].map((id) => `${id} drain`).sort());
  });

  it('reads ahead: the next read is in hand (held from arrival) while a read is settled', async () => {
    const { key, ids } = await ownPel(5);
    const gated = firstCallWaits();
    const loop = loops.open({ streams: [key], options: { batchSize: 2, minIdleMs: MIN_IDLE_MS }, handle: gated.handle });
    const done = lastValueFrom(loop.selfDrain$().pipe(toArray()));
    await waitFor(() => heldOn(loop, key) === 4, { message: 'two reads held' });
    expect(loop.calls).toEqual([`${ids[0]} drain`]);
    gated.open();
    await done;
    expect(loop.calls).toEqual(ids.map((id) => `${id} drain`));
  });

  it('stopping: the read-ahead drain batch goes back to the group at once, and the drain ends after the read in hand', async () => {
    const { key, ids } = await ownPel(4);
    const gated = firstCallWaits();
    const loop = loops.open({ streams: [key], options: { batchSize: 1, minIdleMs: MIN_IDLE_MS }, handle: gated.handle });
    const done = lastValueFrom(loop.selfDrain$().pipe(toArray()));
    await waitFor(() => heldOn(loop, key) === 2, { message: 'the read-ahead held' });
    loop.stop.stop('stopping');
    gated.open();
    expect((await done).map((s) => s.fetched)).toEqual([1]);
    await loop.acks.flush();
    const rows = await rowsOf(key);
    expect([...rows.keys()]).toEqual(ids.slice(1));
    expect(rows.get(ids[1]!)!.idle).toBeGreaterThanOrEqual(MIN_IDLE_MS);
    for (const id of ids.slice(2)) expect(rows.get(id)!.idle).toBeLessThan(MIN_IDLE_MS);
    expect(loop.calls).toEqual([`${ids[0]} drain`]);
    expect(loop.custody.entries()).toEqual([]);
  });

  it('abandoned: the read-ahead drain batch is left held for abandon(), no command of its own', async () => {
    const { key, ids } = await ownPel(2);
    const gated = firstCallWaits();
    const loop = loops.open({ streams: [key], options: { batchSize: 1, minIdleMs: MIN_IDLE_MS }, handle: gated.handle });
    const done = lastValueFrom(loop.selfDrain$().pipe(toArray()));
    await waitFor(() => heldOn(loop, key) === 2, { message: 'the read-ahead held' });
    loop.stop.stop('abandoned');
    gated.open();
    await done;
    expect(loop.custody.heldIds()).toEqual(new Map([[key, ids]]));
    expect((await rowsOf(key)).get(ids[1]!)!.idle).toBeLessThan(MIN_IDLE_MS);
  });
});

describe('ReadAhead (the one read-ahead both steps keep)', () => {
  const entry = (id: string, fields: readonly string[] | null = ['n', id]): StreamEntry => ({ stream: 's', id, fields }) as StreamEntry;
  const logger = { log: () => undefined, warn: () => undefined, error: () => undefined };
  const handedBack: [string[], number][] = [];
  const custody = {
    handBack: async (entries: readonly StreamEntry[], idleMs: number) => void handedBack.push([entries.map((e) => e.id), idleMs]),
  };
  beforeEach(() => void handedBack.splice(0));

  it('keeps one read for the next step: take() gives it once; a failed read is the taker’s to report, not unhandled', async () => {
    const ahead = new ReadAhead<StreamEntry[]>((r) => r);
    expect(ahead.out).toBe(false);
    const failing = Promise.reject(new Error('connection lost'));
    ahead.keep(failing);
    // Let an unhandled rejection surface if the keep did not catch it (vitest fails the run on one).
    await new Promise((resolve) => setImmediate(resolve));
    expect(ahead.out).toBe(true);
    expect(ahead.take()).toBe(failing);
    expect(ahead.take()).toBeUndefined();
    await expect(failing).rejects.toThrow('connection lost');
  });

  it('handBack: the entries with fields go back at minIdleMs; nothing after an abandon; a failed read hands back nothing', async () => {
    const stop = new StopSignal();
    stop.stop('stopping');
    const ahead = new ReadAhead<StreamEntry[]>((r) => r);
    ahead.keep(Promise.resolve([entry('1-0'), entry('2-0', null), entry('3-0')]));
    await ahead.handBack({ stop, custody, minIdleMs: 1234, logger }, 'test');
    expect(handedBack).toEqual([[['1-0', '3-0'], 1234]]);
    expect(ahead.out).toBe(false);
    ahead.keep(Promise.reject(new Error('gone')));
    await ahead.handBack({ stop, custody, minIdleMs: 1234, logger }, 'test');
    expect(handedBack).toHaveLength(1);
    const abandoned = new StopSignal();
    abandoned.stop('abandoned');
    ahead.keep(Promise.resolve([entry('4-0')]));
    await ahead.handBack({ stop: abandoned, custody, minIdleMs: 1234, logger }, 'test');
    expect(handedBack).toHaveLength(1);
    expect(ahead.out).toBe(false);
  });
});
