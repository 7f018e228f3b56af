/**
 * Batch handlers: Nest's own layers around a batch handler (interceptors, a
 * second handler on the same stream) against "a BatchFailure (thrown or returned) fails only
 * the entries it lists".
 */
import { Controller, Injectable, UseInterceptors, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { BatchFailure, RedisStreamsContext, type StreamBatchEntry } from 'nestjs-redis-streams';
import { map } from 'rxjs';
import { addOrders, BatchLog, batchController, pendingOf } from './support/batch-app.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

const start = useApps();

/** The common "wrap every response" interceptor (`{ data }`), as many apps install globally. */
@Injectable()
class WrapInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(map((data: unknown) => ({ data })));
  }
}

const failSecond = (entries: StreamBatchEntry[]) => new BatchFailure([{ entry: entries[1]!, error: new Error('row 1 refused') }]);

describe('batch handlers: batch handlers inside Nest', () => {
  it('a returned BatchFailure still fails its entries when an interceptor maps the handler result', async () => {
    const prefix = uniquePrefix();
    const Ctl = batchController('batched', { batch: { maxSize: 3, maxWaitMs: 5_000 } }, (proto, key, d) => UseInterceptors(WrapInterceptor)(proto, key, d));
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 },
      { controllers: [Ctl], providers: [BatchLog, WrapInterceptor] },
    );
    const log = app.app.get(BatchLog);
    log.behavior = (entries) => failSecond(entries);
    const ids = await addOrders(redis, app.key('batched'), 3);
    await waitFor(() => app.settled.length === 3, { message: 'three settled entries' });
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    // README: "it throws or returns a BatchFailure listing entries: only those fail".
    expect(ids.map((id) => outcome[id])).toEqual(['acked', 'failed', 'acked']);
    expect(await pendingOf(redis, app.key('batched'))).toBe(1);
  });

  it('two batch handlers on one stream: a BatchFailure returned by one of them still fails its entries', async () => {
    const prefix = uniquePrefix();
    const A = batchController('batched', { batch: { maxSize: 3, maxWaitMs: 5_000 } });
    const B = batchController('batched', { batch: { maxSize: 3, maxWaitMs: 5_000 } });
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 },
      { controllers: [A, B], providers: [BatchLog] },
    );
    const log = app.app.get(BatchLog);
    let call = 0;
    // The first handler (say, the DB writer) refuses row 1; the second (say, an indexer) succeeds.
    log.behavior = (entries) => (call++ % 2 === 0 ? failSecond(entries) : undefined);
    const ids = await addOrders(redis, app.key('batched'), 3);
    await waitFor(() => app.settled.length === 3, { message: 'three settled entries' });
    expect(log.calls.length).toBe(2);
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect(ids.map((id) => outcome[id])).toEqual(['acked', 'failed', 'acked']);
  });

  /** A single-entry handler on the stream of a batch handler, registered after it (or before it). */
  for (const order of ['batch first', 'single-entry first'] as const) {
    it(`a single-entry handler and a batch handler on one stream (${order}) are refused at listen, naming the pattern`, async () => {
      @Controller()
      class SingleCtl {
        @EventPattern<string>('batched')
        one(@Payload() _payload: unknown, @Ctx() _ctx: RedisStreamsContext) {}
      }
      const Batch = batchController('batched', { batch: { maxSize: 3 } });
      await expect(
        start({ connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: uniquePrefix(), blockMs: 100 }, { controllers: order === 'batch first' ? [Batch, SingleCtl] : [SingleCtl, Batch], providers: [BatchLog] }),
      ).rejects.toThrow(/the handlers of "batched" disagree on their partitions or batch options/);
    });
  }
});
