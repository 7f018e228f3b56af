/**
 * Batch handlers: a cut connection or a dead Redis while a batch is filling,
 * shutdown with a hung call and concurrency.
 */
import { addOrders, BatchLog, batchController, deliveredOf } from './support/batch-app.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis({ standalone: true })));
afterAll(async () => redis?.stop());

const start = useApps();

async function startBatch(batch: Record<string, unknown>, options: Record<string, unknown> = {}) {
  const app = await start(
    consumerOptions(redis, { consumer: 'c1', blockMs: 100, retryInitialDelayMs: 20, retryMaxDelayMs: 200, ...options }),
    { controllers: [batchController('batched', { batch })], providers: [BatchLog] },
  );
  return Object.assign(app, { log: app.app.get(BatchLog) });
}

describe('batch handlers: faults around a filling batch', () => {
  it('the batch reader’s blocking connection is killed while a batch fills: every entry is handled exactly once and acked', async () => {
    const app = await startBatch({ maxSize: 10, maxWaitMs: 20_000 }, { blockMs: 20_000, minIdleMs: 60_000 });
    const first = await addOrders(redis, app.key('batched'), 3);
    await waitFor(async () => (await deliveredOf(redis, app.key('batched'))) === 3, { message: 'three entries fetched, filling' });
    expect(app.log.calls).toHaveLength(0);
    // Readers: [the single-entry reader, the batch reader]; the batch reader's blocking lane is parked (CLIENT ID on it would queue).
    const batchLane = (app.server as unknown as { engine: { run: { readers: { lanes: { blockingLane: { id?: number } } }[] } } }).engine.run
      .readers[1]!.lanes.blockingLane;
    const r = redis.client();
    expect(await r.client('KILL', 'ID', String(batchLane.id))).toBe(1);
    // Ten more: a full batch after the restart (a short one would wait its 20 s).
    const more = await addOrders(redis, app.key('batched'), 10, 3);
    await waitFor(async () => app.log.ids().length >= 13 && (await pendingCount(redis, app.key('batched'))) === 0, {
      message: 'all thirteen handled and acked',
    });
    expect([...app.log.ids()].sort()).toEqual([...first, ...more].sort());
  });

  it('Redis dies while a batch fills and comes back (empty): the loop resumes and handles the next batch', async () => {
    const app = await startBatch({ maxSize: 10, maxWaitMs: 20_000 }, { blockMs: 500, minIdleMs: 60_000, commandTimeoutMs: 1_000 });
    await addOrders(redis, app.key('batched'), 2);
    await waitFor(async () => (await deliveredOf(redis, app.key('batched'))) === 2, { message: 'two entries fetched, filling' });
    await redis.kill();
    await redis.revive();
    // The new server is empty: the two are gone with it. What matters: no hang, the next entries are handled.
    await waitFor(
      async () => {
        await addOrders(redis, app.key('batched'), 1, 100).catch(() => undefined);
        return app.log.payloads().some((p) => p.order_id === '100');
      },
      { timeoutMs: 20_000, intervalMs: 1_000, message: 'an entry written after the restart handled' },
    );
  }, 40_000);

  it('close() with concurrency 2 and a hung call: returns within shutdownTimeoutMs; the batches not started go back to the group for the next worker at once', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}batched`;
    const ids = await addOrders(redis, key, 20);
    const app = await startBatch(
      { maxSize: 5 },
      { keyPrefix: prefix, concurrency: 2, shutdownTimeoutMs: 500, minIdleMs: 60_000, readAhead: false },
    );
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.log.behavior = () => gate;
    try {
      await waitFor(() => app.log.running === 2, { message: 'two calls running' });
      const t0 = performance.now();
      await app.close();
      // The hung call never returns: waiting for it never ends. shutdownTimeoutMs (500 ms) plus closing,
      // with room for a busy machine: twenty times shutdownTimeoutMs.
      expect(performance.now() - t0).toBeLessThan(20 * 500);
    } finally {
      release();
    }
    const started = app.log.ids();
    expect(started).toHaveLength(10);
    // A peer under another name: the unstarted 10 were handed back (idle = minIdleMs), so its first reclaim takes them.
    const next = await startBatch({ maxSize: 5 }, { keyPrefix: prefix, consumer: 'c2', minIdleMs: 60_000 });
    await waitFor(() => next.log.ids().length === 10, { message: 'the ten unstarted entries taken by the peer' });
    expect([...started, ...next.log.ids()].sort()).toEqual([...ids].sort());
  });

  it('close() while a batch fills and Redis is down: returns, bounded', async () => {
    const app = await startBatch({ maxSize: 10, maxWaitMs: 60_000 }, { blockMs: 60_000, minIdleMs: 60_000, commandTimeoutMs: 1_000 });
    await addOrders(redis, app.key('batched'), 2);
    await waitFor(async () => (await deliveredOf(redis, app.key('batched'))) === 2, { message: 'two entries fetched, filling' });
    await redis.kill();
    try {
      const t0 = performance.now();
      await app.close();
      // Bounded by commandTimeoutMs (1 s) per step; the unbounded waits (maxWaitMs, blockMs, ioredis' retries)
      // are a minute or forever. 20 s is room for a busy machine and a third of the nearest defect.
      expect(performance.now() - t0).toBeLessThan(20_000);
    } finally {
      await redis.revive();
    }
  }, 60_000);

  it('close() during a call with a read-ahead that brought a short batch: that batch is handed back, not handled, and a peer takes it at once', async () => {
    const app = await startBatch({ maxSize: 5, maxWaitMs: 5_000 }, { blockMs: 20_000, minIdleMs: 60_000 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.log.behavior = () => gate;
    const first = await addOrders(redis, app.key('batched'), 5);
    let closed: Promise<void> | undefined;
    try {
      await waitFor(() => app.log.running === 1, { message: 'the first call running' });
      const ahead = await addOrders(redis, app.key('batched'), 1, 5);
      await waitFor(async () => (await deliveredOf(redis, app.key('batched'))) === 6, { message: 'the read-ahead took it' });
      closed = app.close();
      release();
      await closed;
      expect(app.log.ids()).toEqual(first);
      const next = await startBatch({ maxSize: 5, maxWaitMs: 100 }, { keyPrefix: app.key(''), consumer: 'c2', minIdleMs: 60_000 });
      await waitFor(() => next.log.ids().length === 1, { message: 'the peer takes the one handed back' });
      expect(next.log.ids()).toEqual(ahead);
    } finally {
      release();
    }
  });
});

declare module './support/batch-app.js' {
  interface BatchLog {
    payloads(): Record<string, string>[];
  }
}
BatchLog.prototype.payloads = function (this: BatchLog) {
  return this.calls.flatMap((c) => c.payloads as Record<string, string>[]);
};
