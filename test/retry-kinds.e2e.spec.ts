import { Controller } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { BatchFailure, RedisStreamsContext, RetryLaterException, StreamPattern } from 'nestjs-redis-streams';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { Recorder, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/** `flaky` retries after 100 ms (its own policy), whatever the server's says. */
@Controller()
class FlakyController {
  constructor(private readonly recorder: Recorder) {}

  @StreamPattern('flaky', { retry: { backoff: { type: 'fixed', delayMs: 100 } } })
  flaky(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }
}

const lines = () => {
  const all: string[] = [];
  const keep = (m: unknown) => all.push(String(m));
  return { all, logger: { log: keep, warn: keep, error: keep, debug: () => {}, verbose: () => {} } };
};

describe('retry policies per pattern, for batch handlers, and their bound', () => {
  it("a @StreamPattern's own retry wins over the server's; a pattern without one keeps the server's", async () => {
    const app = await start(
      consumerOptions(redis, {
        blockMs: 5000,
        minIdleMs: 60_000,
        retry: { backoff: { type: 'fixed', delayMs: 60_000 } },
      }),
      { controllers: [FlakyController] },
    );
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error(`${call.pattern} fails once`);
    };
    // The same id in both streams, as two XADDs in one millisecond give (CI saw it): events are told apart by stream and id.
    const id = `${Date.now()}-0`;
    const flaky = (await redis.client().xadd(app.key('flaky'), id, 'data', '1'))!;
    const order = (await redis.client().xadd(app.key('orders'), id, 'data', '1'))!;
    const of = (stream: string, entry: string) => app.settled.filter((e) => e.stream === stream && e.id === entry);
    await waitFor(() => of(app.key('flaky'), flaky).length === 2, { message: 'the flaky entry retried' });
    expect(of(app.key('flaky'), flaky).map((e) => [e.outcome, e.retryInMs])).toEqual([
      ['failed', 100],
      ['acked', undefined],
    ]);
    // The server's minute: still waiting.
    expect(of(app.key('orders'), order).map((e) => [e.outcome, e.retryInMs])).toEqual([['failed', 60_000]]);
    expect(await redis.client().zscore(retrySetKey(app.key('orders'), 'g'), order)).not.toBeNull();
  });

  it('a batch handler: the entries a BatchFailure lists follow the policy each (a RetryLaterException its own delay), the rest are acked; one line for the call says when', async () => {
    const log = lines();
    const Ctl = batchController('batched', {
      batch: { maxSize: 5, maxWaitMs: 2000 },
      retry: { backoff: { type: 'exponential', delayMs: 100 } },
    });
    const app = await start(consumerOptions(redis, { blockMs: 5000, minIdleMs: 60_000 }), {
      controllers: [Ctl],
      providers: [BatchLog],
      logger: log.logger,
    });
    const batches = app.app.get(BatchLog);
    batches.behavior = (entries) => {
      const failed = entries.flatMap((e) => {
        const n = Number((e.payload as { order_id?: string } | undefined)?.order_id ?? e.context.getFields().order_id);
        if (e.context.getDeliveryCount() > 1) return [];
        if (n === 1) return [{ entry: e, error: new Error('row 1 rejected') }];
        if (n === 3) return [{ entry: e, error: new RetryLaterException(300) }];
        return [];
      });
      if (failed.length > 0) throw new BatchFailure(failed);
    };
    const ids = await addOrders(redis, app.key('batched'), 5);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 5, { message: 'all five acked in the end' });
    const byId = (id: string) => app.settled.filter((e) => e.id === id).map((e) => [e.outcome, e.deliveryCount, e.retryInMs]);
    expect(byId(ids[1]!)).toEqual([
      ['failed', 1, 100],
      ['acked', 2, undefined],
    ]);
    expect(byId(ids[3]!)).toEqual([
      ['failed', 1, 300],
      ['acked', 2, undefined],
    ]);
    for (const i of [0, 2, 4]) expect(byId(ids[i]!)).toEqual([['acked', 1, undefined]]);
    expect(log.all.filter((l) => l.includes('batch handler for'))).toEqual([
      expect.stringMatching(/failed on 2 of 5 entries .*: Error: row 1 rejected; left pending, next try in 100–300 ms$/),
    ]);
  });

  it('maxWaitingRetries: at the cap, no new entry is read (logged once) until retries are taken; then reading resumes and nothing is lost', async () => {
    const prefix = uniquePrefix();
    const log = lines();
    const app = await start(
      {
        connection: redis.connection,
        group: 'g',
        keyPrefix: prefix,
        blockMs: 200,
        minIdleMs: 60_000,
        batchSize: 1,
        // No read-ahead: what is read is what the loop asked for, one at a time.
        readAhead: false,
        maxWaitingRetries: 3,
        retry: { backoff: { type: 'fixed', delayMs: 1500 } },
      },
      { logger: log.logger },
    );
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1 && Number((call.payload as { n: number }).n) < 3) throw new Error('first try fails');
    };
    const r = redis.client();
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) ids.push((await r.xadd(app.key(), '*', 'data', JSON.stringify({ n })))!);
    await waitFor(
      () => log.all.some((l) => /3 failed entries wait for their retry here \(maxWaitingRetries 3\): no new entries are read/.test(l)),
      {
        message: 'the cap to be reached',
      },
    );
    // The three failed; the fourth not read while they wait (read only after a retry frees a place).
    expect(app.recorder.calls.map((c) => c.id)).toEqual(ids.slice(0, 3));
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 5, { message: 'everything acked', timeoutMs: 15_000 });
    const firstRetry = app.recorder.calls.findIndex((c) => c.deliveryCount === 2);
    const fourth = app.recorder.calls.findIndex((c) => c.id === ids[3]);
    expect(firstRetry).toBeLessThan(fourth);
    expect(log.all.filter((l) => l.includes('maxWaitingRetries'))).toHaveLength(1);
  });

  it('10,000 entries waiting for their retry: new entries are still read and handled meanwhile; close() hands the 10,000 back', async () => {
    const prefix = uniquePrefix();
    const app = await start({
      connection: redis.connection,
      group: 'g',
      keyPrefix: prefix,
      blockMs: 500,
      minIdleMs: 60_000,
      batchSize: 500,
      // Ten minutes: they wait through the whole test.
      retry: { backoff: { type: 'fixed', delayMs: 600_000 } },
    });
    const fresh = new Set<string>();
    app.recorder.behavior = (call) => {
      if ((call.payload as { n: number }).n >= 10_000) fresh.add(call.id);
      else throw new Error('downstream down');
    };
    const waiting = await write(app.key(), 0, 10_000);
    const failures = () => app.settled.filter((e) => e.outcome === 'failed').length;
    // However slowly a busy machine gets through them: a stall of 30 s fails.
    await waitFor(() => failures() >= 10_000, { message: '10,000 failures', timeoutMs: 30_000, progress: failures });
    expect(failures()).toBe(10_000);
    const news = await write(app.key(), 10_000, 200);
    await waitFor(() => news.every((id) => fresh.has(id)), { message: 'the new entries handled while 10,000 wait', timeoutMs: 30_000 });
    // Their acks follow the handler (the settled event comes once Redis confirmed them).
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 200, { message: 'the 200 acks' });
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(10_000);
    await app.close();
    // Handed back with their schedule: still pending under "their" consumer with one delivery each, records kept.
    const pending = (await redis.client().xpending(app.key(), 'g')) as [number, string, string, [string, string][]];
    expect(pending[0]).toBe(10_000);
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(10_000);
    expect(waiting).toHaveLength(10_000);
  }, 600_000);

  it("a run of failures does not wait for each one's retry record: the next entries start while Redis holds the records", async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip(); // pauses the whole server's writes
    const app = await start(
      consumerOptions(redis, { blockMs: 500, minIdleMs: 60_000, batchSize: 50, retry: { backoff: { type: 'fixed', delayMs: 60_000 } } }),
    );
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    app.recorder.behavior = async (call) => {
      if ((call.payload as { n: number }).n === 0) await gate;
      throw new Error('downstream down');
    };
    const ids = await write(app.key(), 0, 50);
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the first of the read in hand' });
    const admin = redis.newClient();
    // Writes wait (the retry records, a script each); reads are answered. Ended by hand below, or by itself.
    await admin.call('CLIENT', 'PAUSE', 30_000, 'WRITE');
    try {
      open();
      // Before: the worker awaited each failure's record before the next entry: one call, until the pause ended.
      await waitFor(() => app.recorder.calls.length === 50, { message: 'every handler of the read called', timeoutMs: 15_000 });
      expect(await admin.zcard(retrySetKey(app.key(), 'g'))).toBe(0);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    const failed = () => app.settled.filter((e) => e.outcome === 'failed').length;
    await waitFor(() => failed() === 50, { message: 'the 50 failures settled', progress: failed });
    expect(app.settled.map((e) => [e.id, e.retryInMs])).toEqual(ids.map((id) => [id, 60_000]));
    expect(await admin.zcard(retrySetKey(app.key(), 'g'))).toBe(50);
    expect(app.recorder.calls.map((c) => c.id)).toEqual(ids);
  });

  // A logger's failure is the logger's: the engine's line goes to stderr instead, and the loop goes on as if it had been
  // written. Before: the one whose line threw was never settled and the loop restarted (review-w).
  it("a logger that throws on a failure's line: every failure of the read is settled once, and the loop goes on (review-v, review-w)", async () => {
    let broke = 0;
    const kept: string[] = [];
    const keep = (m: unknown) => kept.push(String(m));
    const logger = {
      log: keep,
      warn: keep,
      error: (m: unknown) => {
        if (/failed on entry/.test(String(m))) {
          broke++;
          throw new Error('logger broke');
        }
        keep(m);
      },
      debug: () => {},
      verbose: () => {},
    };
    const app = await start(
      consumerOptions(redis, { blockMs: 500, minIdleMs: 60_000, batchSize: 10, retry: { backoff: { type: 'fixed', delayMs: 60_000 } } }),
      { logger },
    );
    app.recorder.behavior = () => {
      throw new Error('downstream down');
    };
    const ids = await write(app.key(), 0, 10);
    await waitFor(() => ids.every((id) => app.settled.some((e) => e.id === id)), { message: 'all ten settled' });
    expect(broke).toBeGreaterThan(0);
    for (const id of ids)
      expect(app.settled.filter((e) => e.id === id).map((e) => [e.outcome, e.deliveryCount, e.retryInMs])).toEqual([['failed', 1, 60_000]]);
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(10);
    // The loop did not fail: it would log "consumer loop: …" and self-drain, running the entries again.
    const more = await write(app.key(), 10, 1);
    await waitFor(() => app.settled.some((e) => e.id === more[0]), { message: 'a later entry settled' });
    expect(kept.filter((line) => line.includes('consumer loop'))).toEqual([]);
    expect(app.recorder.calls.map((c) => c.id).sort()).toEqual([...ids, ...more].sort());
  });

  it('2,000 entries failing at once are each retried once when due, same id, count 2, nothing left pending or recorded', async () => {
    const app = await start(
      consumerOptions(redis, {
        blockMs: 500,
        minIdleMs: 60_000,
        batchSize: 500,
        retry: { backoff: { type: 'fixed', delayMs: 500 } },
      }),
    );
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error('downstream down');
    };
    const ids = await write(app.key(), 0, 2000);
    const acked = () => app.settled.filter((e) => e.outcome === 'acked').length;
    await waitFor(() => acked() >= 2000, { message: 'every retry acked', timeoutMs: 30_000, progress: acked });
    expect(acked()).toBe(2000);
    const retries = app.recorder.calls.filter((c) => c.deliveryCount === 2);
    expect(retries.map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(app.recorder.calls.filter((c) => c.deliveryCount > 2)).toEqual([]);
    expect(((await redis.client().xpending(app.key(), 'g')) as unknown[])[0]).toBe(0);
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(0);
  }, 600_000);
});

/** Writes entries `{ n }` for n in [from, from + count), pipelined; their ids. */
async function write(key: string, from: number, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let at = from; at < from + count; at += 2000) {
    const pipeline = redis.client().pipeline();
    for (let n = at; n < Math.min(at + 2000, from + count); n++) pipeline.xadd(key, '*', 'data', JSON.stringify({ n }));
    ids.push(
      ...(await pipeline.exec())!.map(([err, id]) => {
        if (err) throw err;
        return id as string;
      }),
    );
  }
  return ids;
}
