/**
 * Batch handlers: mixed batches (undecodable, oversized, past maxDeliveries,
 * requests) with good entries; BatchFailure edge cases; guard refusals; timeouts.
 */
import { Controller, Injectable, UseGuards, type CanActivate } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { BatchFailure, DeadLetterException, REDIS_STREAMS_TRANSPORT, type StreamBatchEntry } from 'nestjs-redis-streams';
import { lastValueFrom, of, throwError } from 'rxjs';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { useProducers } from './support/producer.js';
import { deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';
import { groupOnNewStream } from './support/backlog.js';

const redis = useRedis();

const start = useApps();
const producer = useProducers();

@Injectable()
class RefuseGuard implements CanActivate {
  canActivate() {
    return false;
  }
}

async function startBatch(batch: Record<string, unknown>, options: Record<string, unknown> = {}, guard = false) {
  const Ctl = batchController('batched', { batch }, guard ? (p, k, d) => UseGuards(RefuseGuard)(p, k, d) : undefined);
  const app = await start(consumerOptions(redis, { consumer: 'c1', blockMs: 100, ...options }), {
    controllers: [Ctl],
    providers: [BatchLog, RefuseGuard],
  });
  return Object.assign(app, { log: app.app.get(BatchLog) });
}

const deadIds = async (key: string) =>
  (await redis.client().xrange(deadLetterKey(key), '-', '+')).map(([, f]) => f[f.indexOf('sourceId') + 1] ?? f.join(' '));

describe('batch handlers: mixed batches and failure reports', () => {
  it('self-drain batch with undecodable, oversized and over-delivered entries: only the good ones reach the call, the rest dead-lettered, none pending', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r, 'batched');
    const good1 = (await r.xadd(key, '*', 'order_id', '1'))!;
    const badJson = (await r.xadd(key, '*', 'data', '{not json'))!;
    const huge = (await r.xadd(key, '*', 'data', JSON.stringify({ blob: 'x'.repeat(4096) })))!;
    const worn = (await r.xadd(key, '*', 'order_id', 'worn'))!;
    const good2 = (await r.xadd(key, '*', 'order_id', '2'))!;
    await r.xreadgroup('GROUP', 'g', 'c1', 'COUNT', 10, 'STREAMS', key, '>');
    await r.xclaim(key, 'g', 'c1', 0, worn, 'RETRYCOUNT', 9);
    const app = await startBatch({ maxSize: 10 }, { keyPrefix: prefix, maxDeliveries: 3, maxEntryBytes: 1000, minIdleMs: 60_000 });
    await waitFor(() => app.settled.length === 5, { message: 'five settled' });
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect([good1, badJson, huge, worn, good2].map((id) => outcome[id])).toEqual([
      'acked',
      'dead-lettered',
      'dead-lettered',
      'dead-lettered',
      'acked',
    ]);
    expect(app.log.calls.map((c) => c.ids)).toEqual([[good1, good2]]);
    await waitFor(async () => (await pendingCount(redis, key)) === 0, { message: 'nothing pending' });
    expect((await deadIds(key)).sort()).toEqual([badJson, huge, worn].sort());
  });

  it('an entry that is not ready at once after ready ones (a deserializer answering with a promise): every entry reaches the call once, each settled once', async () => {
    // Review finding: the entries after the first one not ready at once got that one's checks, were handed to the
    // handler as copies of it, and acked unhandled.
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r, 'batched');
    const ids: string[] = [];
    for (const data of ['{"n":1}', '{"n":2,"later":true}', '{"n":3}', '{"n":4}', '{"n":5}'])
      ids.push((await r.xadd(key, '*', 'data', data))!);
    let deserialized = 0;
    const deserializer = {
      deserialize: (value: string) => {
        deserialized++;
        const parsed = JSON.parse(value) as { later?: boolean };
        return parsed.later ? Promise.resolve(parsed) : parsed;
      },
    };
    const app = await startBatch({ maxSize: 10 }, { keyPrefix: prefix, deserializer, minIdleMs: 60_000 });
    await waitFor(async () => app.settled.length >= 5 && (await pendingCount(redis, key)) === 0, { message: 'five settled, none pending' });
    expect(app.log.calls.map((c) => c.ids)).toEqual([ids]);
    expect(app.settled.map((e) => `${e.id} ${e.outcome}`)).toEqual(ids.map((id) => `${id} acked`));
    expect(deserialized).toBe(5);
  });

  it('a request (send) to a batch pattern is answered "no matching message handler" and acked; the events beside it reach the call', async () => {
    const app = await startBatch({ maxSize: 4, maxWaitMs: 3_000 }, { minIdleMs: 60_000 });
    const prefix = app.key('');
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const [a] = await addOrders(redis, app.key('batched'), 1);
    const answer = lastValueFrom(client.send('batched', { q: 1 })).then(
      (v) => ({ ok: v }),
      (e: unknown) => ({ err: e }),
    );
    const [b] = await addOrders(redis, app.key('batched'), 1, 1);
    expect(await answer).toEqual({ err: 'There is no matching message handler defined in the remote service.' });
    await waitFor(async () => app.log.ids().length === 2 && (await pendingCount(redis, app.key('batched'))) === 0, {
      message: 'all settled',
    });
    expect(app.log.ids()).toEqual([a, b]);
  });

  it('a BatchFailure listing one entry twice, a foreign entry and a DeadLetterException: each listed entry fails once, the rest acked', async () => {
    const app = await startBatch({ maxSize: 4, maxWaitMs: 5_000 }, { minIdleMs: 60_000 });
    let previous: StreamBatchEntry[] = [];
    app.log.behavior = (entries) => {
      const foreign = previous[0];
      previous = entries;
      if (!foreign) return undefined;
      throw new BatchFailure([
        { entry: entries[0]!, error: new Error('first') },
        { entry: entries[0]!, error: new DeadLetterException('first again, for good') },
        { entry: foreign, error: new Error('not in this batch') },
        { entry: entries[2]!, error: 'a string, not an Error' },
      ]);
    };
    await addOrders(redis, app.key('batched'), 4);
    await waitFor(() => app.settled.length === 4, { message: 'the first batch acked' });
    const ids = await addOrders(redis, app.key('batched'), 4, 4);
    await waitFor(() => app.settled.length === 8, { message: 'the second batch settled' });
    const outcome = Object.fromEntries(app.settled.slice(4).map((e) => [e.id, e.outcome]));
    // Duplicate: one of the two (the last listed wins); the string error is a plain failure.
    expect(ids.map((id) => outcome[id])).toEqual(['dead-lettered', 'acked', 'failed', 'acked']);
    expect(await pendingCount(redis, app.key('batched'))).toBe(1);
  });

  it('a guard that refuses: the entries stay pending, come back, and are dead-lettered past maxDeliveries (never acked)', async () => {
    const app = await startBatch({ maxSize: 3, maxWaitMs: 2_000 }, { minIdleMs: 200, maxDeliveries: 2 }, true);
    const ids = await addOrders(redis, app.key('batched'), 3);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 3, { message: 'three dead letters' });
    expect(app.settled.filter((e) => e.outcome === 'acked')).toEqual([]);
    expect(app.log.calls).toEqual([]);
    expect((await deadIds(app.key('batched'))).sort()).toEqual(ids.sort());
  });

  it('handlerTimeoutMs with a hung batch handler: the call counts as failed, entries come back and are dead-lettered; close() does not wait for the hung call', async () => {
    // shutdownTimeoutMs is what a close waiting for the hung call would take: long, so that the bound
    // below sits an order of magnitude above a close on a busy machine and far below the defect.
    const shutdownTimeoutMs = 20_000;
    const app = await startBatch(
      { maxSize: 3, maxWaitMs: 2_000 },
      { minIdleMs: 200, maxDeliveries: 2, handlerTimeoutMs: 200, shutdownTimeoutMs },
    );
    app.log.behavior = () => new Promise(() => {});
    const ids = await addOrders(redis, app.key('batched'), 3);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 3, { message: 'three dead letters' });
    // One call of the three on delivery 1 (they fill maxSize), then delivery 2 for each. A beat reclaims
    // what is idle past minIdleMs, so the three may come back in one call or two (CI saw [2] then [2, 2]).
    expect(app.log.calls[0]!.deliveryCounts).toEqual([1, 1, 1]);
    const again = app.log.calls.slice(1);
    expect(again.flatMap((c) => c.deliveryCounts)).toEqual([2, 2, 2]);
    expect(again.flatMap((c) => c.ids).sort()).toEqual([...ids].sort());
    expect((await deadIds(app.key('batched'))).sort()).toEqual(ids.sort());
    const t0 = performance.now();
    await app.close();
    expect(performance.now() - t0).toBeLessThan(shutdownTimeoutMs / 4);
  });

  it('a batch handler that throws a non-Error (a string, undefined) fails every entry: pending, not acked', async () => {
    const app = await startBatch({ maxSize: 2, maxWaitMs: 2_000 }, { minIdleMs: 60_000 });
    let n = 0;
    app.log.behavior = () => {
      throw n++ === 0 ? 'boom' : undefined;
    };
    await addOrders(redis, app.key('batched'), 2);
    await waitFor(() => app.settled.length === 2, { message: 'first call settled' });
    await addOrders(redis, app.key('batched'), 2, 2);
    await waitFor(() => app.settled.length === 4, { message: 'second call settled' });
    expect(app.settled.map((e) => e.outcome)).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(await pendingCount(redis, app.key('batched'))).toBe(4);
  });

  it('a BatchFailure returned inside an Observable, or erroring one, fails only its entries', async () => {
    const app = await startBatch({ maxSize: 3, maxWaitMs: 3_000 }, { minIdleMs: 60_000 });
    let n = 0;
    app.log.behavior = (entries) => {
      const failure = new BatchFailure([{ entry: entries[1]!, error: new Error('no') }]);
      return n++ === 0 ? of(failure) : throwError(() => failure);
    };
    for (const round of [0, 1]) {
      const ids = await addOrders(redis, app.key('batched'), 3, round * 3);
      await waitFor(() => app.settled.length === 3 * (round + 1), { message: `round ${round}` });
      const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
      expect(ids.map((id) => outcome[id])).toEqual(['acked', 'failed', 'acked']);
    }
  });

  it('batch on a @MessagePattern is refused at listen; on a plain @EventPattern it works', async () => {
    @Controller()
    class Req {
      @MessagePattern('asked', REDIS_STREAMS_TRANSPORT, { batch: { maxSize: 2 } })
      asked(@Payload() p: unknown) {
        return p;
      }
    }
    await expect(start({ connection: redis.connection, group: 'g', keyPrefix: uniquePrefix() }, { controllers: [Req] })).rejects.toThrow(
      /batch handler answers no request/,
    );
    @Injectable()
    class Seen {
      sizes: number[] = [];
    }
    @Controller()
    class Ev {
      constructor(private readonly seen: Seen) {}
      @EventPattern('evs', { batch: { maxSize: 2 } })
      evs(@Payload() entries: StreamBatchEntry[]) {
        this.seen.sizes.push(entries.length);
      }
    }
    const app = await start(consumerOptions(redis, { blockMs: 100 }), { controllers: [Ev], providers: [Seen] });
    await addOrders(redis, app.key('evs'), 4);
    await waitFor(() => app.settled.length === 4, { message: 'four acked' });
    expect(app.app.get(Seen).sizes.every((s) => s <= 2)).toBe(true);
  });

  it('shutdown while a batch fills with concurrency 3: that batch is handed to the handler and acked; close() does not wait maxWaitMs', async () => {
    const maxWaitMs = 60_000;
    const app = await startBatch({ maxSize: 10, maxWaitMs }, { blockMs: 60_000, concurrency: 3 });
    const ids = await addOrders(redis, app.key('batched'), 4);
    await waitFor(async () => (await pendingCount(redis, app.key('batched'))) === 4, { message: 'four fetched' });
    const t0 = performance.now();
    await app.close();
    // Waiting maxWaitMs (or the park) out costs a minute; a sixth of it is ten times a busy machine's close.
    expect(performance.now() - t0).toBeLessThan(maxWaitMs / 6);
    expect(app.log.ids()).toEqual(ids);
    expect(await pendingCount(redis, app.key('batched'))).toBe(0);
  });
});

describe('batch handlers: entry contexts', () => {
  @Injectable()
  class Lazy {
    behavior: (entries: StreamBatchEntry[]) => unknown = () => undefined;
  }
  @Controller()
  class LazyCtl {
    constructor(private readonly lazy: Lazy) {}
    // Reads no context unless the test's behavior does.
    @EventPattern('lazy', { batch: { maxSize: 4, maxWaitMs: 5_000 } })
    handle(@Payload() entries: StreamBatchEntry[]) {
      return this.lazy.behavior(entries);
    }
  }
  const startLazy = () =>
    start(
      { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: uniquePrefix(), blockMs: 100, minIdleMs: 60_000 },
      { controllers: [LazyCtl], providers: [Lazy] },
    );

  it('a context is the same object on every read and describes its entry; a BatchFailure naming an entry whose context nobody read fails that entry alone', async () => {
    const app = await startLazy();
    const seen: { id: string; stable: boolean; payloads: unknown[] }[] = [];
    app.app.get(Lazy).behavior = (entries) => {
      const context = entries[1]!.context;
      seen.push({ id: context.getId(), stable: entries[1]!.context === context, payloads: entries.map((e) => e.payload) });
      throw new BatchFailure([{ entry: entries[2]!, error: new Error('row 2 rejected') }]);
    };
    const ids = await addOrders(redis, app.key('lazy'), 4);
    await waitFor(() => app.settled.length === 4, { message: 'four settled' });
    expect(seen).toEqual([{ id: ids[1], stable: true, payloads: [0, 1, 2, 3].map((i) => ({ order_id: String(i) })) }]);
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect(ids.map((id) => outcome[id])).toEqual(['acked', 'acked', 'failed', 'acked']);
    expect(await pendingCount(redis, app.key('lazy'))).toBe(1);
  });
});
