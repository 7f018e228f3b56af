import { RpcException } from '@nestjs/microservices';
import { InvalidOptionError, StreamPattern, type StreamBatchOptions } from 'nestjs-redis-streams';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { batchFailure, deadLetter, registered, uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { addOrders as addEntries, deliveredOf } from './support/batch-app.js';
import { pendingCount } from './support/pending.js';
import { groupOnNewStream } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

/** An app (either host: TEST_HOST) whose 'batched' stream has a batch handler recording into `app.batches`. */
function startBatch(batch: StreamBatchOptions, options: Record<string, unknown> = {}): Promise<TestApp> {
  return start(
    { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: uniquePrefix(), blockMs: 100, ...options },
    { handlers: [{ pattern: 'batched', extras: { batch } }] },
  );
}

const addOrders = (key: string, n: number, from = 0) => addEntries(redis, key, n, from);
/** Entries of the group delivered to some consumer (fetched: filling or being handled). */
const delivered = (key: string) => deliveredOf(redis, key);

describe(`batch handlers: ${registered('key')} with { batch }`, () => {
  // The interceptor's pass per call (Nest's) is checked in batch-nest.e2e.spec.ts.
  it('hands a backlog over in calls of at most maxSize, payload and context per entry, and acks them all', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}batched`;
    const ids = await addOrders(key, 25);
    const app = await startBatch({ maxSize: 10 }, { keyPrefix: prefix });
    await waitFor(async () => app.settled.filter((e) => e.outcome === 'acked').length === 25 && (await pendingCount(redis, key)) === 0, {
      message: '25 acked entries',
    });
    expect(app.batches.calls.map((c) => c.size)).toEqual([10, 10, 5]);
    expect(app.batches.calls.map((c) => c.ids.length)).toEqual([10, 10, 5]);
    expect(app.batches.ids()).toEqual(ids);
    expect(app.batches.calls[0]!.payloads[3]).toEqual({ order_id: '3' });
    expect(app.batches.calls.every((c) => c.pattern === 'batched' && c.deliveryCounts.every((d) => d === 1))).toBe(true);
    // The single-entry handlers of the same app are untouched.
    await redis.client().xadd(app.key('orders'), '*', 'order_id', 'x');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the single-entry handler' });
  });

  it('a throw leaves every entry of the call pending; they come back with delivery count 2 through the same handler, and are dead-lettered one by one past maxDeliveries', async () => {
    const app = await startBatch({ maxSize: 4, maxWaitMs: 5_000 }, { minIdleMs: 200, maxDeliveries: 2 });
    app.batches.behavior = () => {
      throw new RpcException('bulk insert failed');
    };
    const ids = await addOrders(app.key('batched'), 4);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'failed').length === 4, { message: 'four failed entries' });
    expect(await pendingCount(redis, app.key('batched'))).toBe(4);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 4, { message: 'four dead letters' });
    // One call on delivery 1 (maxWaitMs fills it). Delivery 2 comes by reclaim, in one call or more and in any
    // order: the entries' idle times differ by the few ms between their reads, and a beat may fall in between.
    const [first, ...again] = app.batches.calls;
    expect([first!.ids, first!.deliveryCounts]).toEqual([ids, [1, 1, 1, 1]]);
    expect([again.flatMap((c) => c.ids).sort(), again.flatMap((c) => c.deliveryCounts)]).toEqual([ids, [2, 2, 2, 2]]);
    expect(app.settled.filter((e) => e.deliveryCount === 2).map((e) => e.source)).toEqual(['reclaim', 'reclaim', 'reclaim', 'reclaim']);
    const dead = (await redis.client().xrange(deadLetterKey(app.key('batched')), '-', '+')).map(([id, fields]) =>
      decodeDeadLetter(id, fields),
    );
    expect(dead.map((d) => d.sourceId).sort()).toEqual(ids);
    expect(dead[0]!.error).toContain('bulk insert failed');
    expect(await pendingCount(redis, app.key('batched'))).toBe(0);
  });

  it('a BatchFailure (thrown or returned; core: BatchFailureError) fails only the entries it lists: a DeadLetterException (DeadLetterError) among them is dead-lettered at once, the rest acked', async () => {
    // maxWaitMs: the five entries of a round make one call even when the first read returns fewer.
    const app = await startBatch({ maxSize: 5, maxWaitMs: 5_000 }, { minIdleMs: 60_000 });
    let round = 0;
    app.batches.behavior = (entries) => {
      round++;
      const failure = batchFailure([
        { entry: entries[1]!, error: new Error('row 1 rejected') },
        { entry: entries[3]!, error: deadLetter('row 3 can never be inserted') },
      ]);
      if (round === 1) throw failure;
      return failure;
    };
    for (const batch of [0, 1]) {
      const before = app.settled.length;
      const ids = await addOrders(app.key('batched'), 5, batch * 5);
      await waitFor(() => app.settled.length === before + 5, { message: `batch ${batch} settled` });
      const outcome = Object.fromEntries(app.settled.slice(before).map((e) => [e.id, e.outcome]));
      expect(ids.map((id) => outcome[id])).toEqual(['acked', 'failed', 'acked', 'dead-lettered', 'acked']);
      expect(app.settled.slice(before).find((e) => e.outcome === 'failed')!.error).toMatchObject({ message: 'row 1 rejected' });
    }
    expect(await pendingCount(redis, app.key('batched'))).toBe(2);
    const dead = (await redis.client().xrange(deadLetterKey(app.key('batched')), '-', '+')).map(([id, fields]) =>
      decodeDeadLetter(id, fields),
    );
    expect(dead.map((d) => d.error)).toEqual([
      'handler refused it: row 3 can never be inserted',
      'handler refused it: row 3 can never be inserted',
    ]);
  });

  it('maxWaitMs: a batch that is not full waits for more entries, and is handed over once full, long before the wait runs out', async () => {
    const app = await startBatch({ maxSize: 5, maxWaitMs: 20_000 }, { blockMs: 20_000 });
    const [first] = await addOrders(app.key('batched'), 1);
    // The first entry is fetched (delivered, in hand) and the handler not called: the batch is filling.
    await waitFor(async () => (await delivered(app.key('batched'))) === 1, { message: 'the first entry fetched' });
    expect(app.batches.calls).toHaveLength(0);
    const rest = await addOrders(app.key('batched'), 4, 1);
    // Far sooner than maxWaitMs (20 s, the defect): full. Three quarters of it is room for a busy machine.
    await waitFor(() => app.batches.calls.length === 1, { message: 'the full batch', timeoutMs: 15_000 });
    expect(app.batches.calls[0]!.ids).toEqual([first, ...rest]);
  });

  it('maxWaitMs: a batch that stays short is handed over when the wait runs out, not at the end of the park', async () => {
    const app = await startBatch({ maxSize: 100, maxWaitMs: 100 }, { blockMs: 20_000 });
    const [id] = await addOrders(app.key('batched'), 1);
    // blockMs (20 s) is the defect; three quarters of it is room for a busy machine.
    await waitFor(() => app.batches.calls.length === 1, { message: 'the short batch, well before blockMs', timeoutMs: 15_000 });
    expect(app.batches.calls[0]!.ids).toEqual([id]);
    await waitFor(async () => (await pendingCount(redis, app.key('batched'))) === 0, { message: 'its ack' });
  });

  it('shutdown hands the batch that is filling to the handler and settles it; close() does not wait for maxWaitMs', async () => {
    const app = await startBatch({ maxSize: 50, maxWaitMs: 20_000 }, { blockMs: 20_000 });
    const ids = await addOrders(app.key('batched'), 3);
    await waitFor(async () => (await delivered(app.key('batched'))) === 3, { message: 'three entries fetched' });
    expect(app.batches.calls).toHaveLength(0);
    const closed = app.close();
    // maxWaitMs (20 s) is the defect; three quarters of it is room for a busy machine.
    await waitFor(() => app.batches.calls.length === 1, { message: 'the filling batch handed over at close', timeoutMs: 15_000 });
    await closed;
    expect(app.batches.calls[0]!.ids).toEqual(ids);
    expect(app.settled.map((e) => e.outcome)).toEqual(['acked', 'acked', 'acked']);
    expect(await pendingCount(redis, app.key('batched'))).toBe(0);
  });

  it('shutdown during a call: that call finishes and is acked; the batches not started stay pending for the next worker', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}batched`;
    const ids = await addOrders(key, 20);
    const app = await startBatch({ maxSize: 5 }, { keyPrefix: prefix });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.batches.behavior = () => gate;
    try {
      await waitFor(() => app.batches.running === 1, { message: 'the first call running' });
      const closed = app.close();
      release();
      await closed;
    } finally {
      release();
    }
    expect(app.batches.calls).toHaveLength(1);
    expect(app.settled.map((e) => e.id)).toEqual(ids.slice(0, 5));
    // Same consumer name: self-drain takes the rest at once, through the batch handler.
    const next = await startBatch({ maxSize: 5 }, { keyPrefix: prefix });
    await waitFor(async () => next.batches.ids().length === 15 && (await pendingCount(redis, key)) === 0, { message: 'the rest drained' });
    expect([...app.batches.ids(), ...next.batches.ids()]).toEqual(ids);
  });

  it('self-drained and reclaimed entries come through the same batch handler, with their delivery counts', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r, 'batched');
    const mine = await addOrders(key, 3);
    await r.xreadgroup('GROUP', 'g', 'c1', 'COUNT', 3, 'STREAMS', key, '>');
    const theirs = await addOrders(key, 4, 3);
    await r.xreadgroup('GROUP', 'g', 'dead-peer', 'COUNT', 4, 'STREAMS', key, '>');
    const app = await startBatch({ maxSize: 10 }, { keyPrefix: prefix, minIdleMs: 200 });
    await waitFor(async () => app.settled.length === 7 && (await pendingCount(redis, key)) === 0, { message: 'all seven settled' });
    const sources = Object.fromEntries(app.settled.map((e) => [e.id, e.source]));
    expect(mine.map((id) => sources[id])).toEqual(['drain', 'drain', 'drain']);
    expect(theirs.map((id) => sources[id])).toEqual(['reclaim', 'reclaim', 'reclaim', 'reclaim']);
    expect(app.batches.calls.map((c) => c.ids)).toEqual([mine, theirs]);
    // Reading its own PEL again (self-drain) counts as a delivery too.
    expect(app.batches.calls.map((c) => c.deliveryCounts)).toEqual([
      [2, 2, 2],
      [2, 2, 2, 2],
    ]);
  });

  it('concurrency runs batches in parallel; read-ahead keeps the next read in flight', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}batched`;
    await addOrders(key, 30);
    const app = await startBatch({ maxSize: 5 }, { keyPrefix: prefix, concurrency: 3 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.batches.behavior = () => gate;
    try {
      await waitFor(() => app.batches.running === 3, { message: 'three calls at once' });
    } finally {
      release();
    }
    await waitFor(async () => app.batches.ids().length === 30 && (await pendingCount(redis, key)) === 0, { message: 'all handled' });
    expect(app.batches.maxRunning).toBe(3);
    expect(app.batches.calls.every((c) => c.size === 5)).toBe(true);
  });

  it('refuses bad batch options at listen, naming the handler', async () => {
    for (const [batch, message] of [
      [{}, /batch.maxSize".*is required/],
      [{ maxSize: 0 }, /batch.maxSize".*positive integer/],
      [{ maxSize: 1001 }, /batch.maxSize".*at most 1000/],
      [{ maxSize: 5, maxWait: 3 }, /batch.maxWait": unknown option/],
      [{ maxSize: 5, maxWaitMs: -1 }, /batch.maxWaitMs".*positive integer/],
    ] as const) {
      await expect(startBatch(batch as StreamBatchOptions), JSON.stringify(batch)).rejects.toThrow(message);
    }
  });

  it('refuses an unknown extra at listen, naming the registration and the key: a typo (bach) would make a batch handler a single-entry one', async () => {
    // @ts-expect-error: `bach` is no option of @StreamPattern (nor of handle()), so a typed literal cannot carry it
    StreamPattern('bulk', { bach: { maxSize: 500 } });
    // An object typed wider (or plain JavaScript) still can: listen (start) refuses it.
    const attempt = start(
      { connection: redis.connection, group: 'g', keyPrefix: uniquePrefix() },
      { handlers: [{ pattern: 'bulk', extras: { bach: { maxSize: 500 } } }] },
    );
    await expect(attempt).rejects.toThrow(InvalidOptionError);
    await expect(attempt).rejects.toThrow(`invalid option "${registered('bulk')} bach": unknown option`);
  });
});
