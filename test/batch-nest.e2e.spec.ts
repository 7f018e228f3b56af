/**
 * Batch handlers inside Nest: interceptors that map results or retry, a BatchFailure made and
 * not thrown, and several handlers of one stream, against "only a thrown BatchFailure fails the
 * entries it lists, and nothing else acks an entry a handler failed".
 */
import { Controller, Injectable, UseInterceptors, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { BatchFailure, RedisStreamsContext, StreamPattern, type StreamBatchEntry } from 'nestjs-redis-streams';
import { defer, map, retry } from 'rxjs';
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

/** A retry interceptor (rxjs `retry`), as apps put around flaky handlers. */
@Injectable()
class RetryOnce implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return defer(() => next.handle()).pipe(retry(1));
  }
}

const failSecond = (entries: StreamBatchEntry[]) => new BatchFailure([{ entry: entries[1]!, error: new Error('row 1 refused') }]);

async function startWith(controllers: unknown[], providers: unknown[] = []) {
  const app = await start(
    { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: uniquePrefix(), blockMs: 100, minIdleMs: 60_000 },
    { controllers, providers: [BatchLog, ...providers] },
  );
  return Object.assign(app, { log: app.app.get(BatchLog) });
}

async function outcomesOf(app: Awaited<ReturnType<typeof startWith>>, ids: string[]) {
  await waitFor(() => app.settled.length === ids.length, { message: `${ids.length} settled entries` });
  const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
  return ids.map((id) => outcome[id]);
}

describe('batch handlers inside Nest', () => {
  it('a thrown BatchFailure fails only its entries behind an interceptor that maps results', async () => {
    const app = await startWith([batchController('batched', { batch: { maxSize: 3, maxWaitMs: 5_000 } }, (proto, key, d) => UseInterceptors(WrapInterceptor)(proto, key, d))], [WrapInterceptor]);
    app.log.behavior = (entries) => {
      throw failSecond(entries);
    };
    const ids = await addOrders(redis, app.key('batched'), 3);
    expect(await outcomesOf(app, ids)).toEqual(['acked', 'failed', 'acked']);
    expect(await pendingOf(redis, app.key('batched'))).toBe(1);
  });

  it('a retry interceptor: the first try throws BatchFailure(X), the retry succeeds for all: X is acked, not run again', async () => {
    const app = await startWith([batchController('retried', { batch: { maxSize: 2, maxWaitMs: 5_000 } }, (proto, key, d) => UseInterceptors(RetryOnce)(proto, key, d))], [RetryOnce]);
    let tries = 0;
    app.log.behavior = (entries) => {
      if (tries++ === 0) throw new BatchFailure([{ entry: entries[0]!, error: new Error('X: transient') }]);
    };
    const ids = await addOrders(redis, app.key('retried'), 2);
    expect(await outcomesOf(app, ids)).toEqual(['acked', 'acked']);
    expect(tries).toBe(2);
  });

  it('a BatchFailure made and not thrown (the handler recovered) fails nothing', async () => {
    const app = await startWith([batchController('speculative', { batch: { maxSize: 2, maxWaitMs: 5_000 } })]);
    app.log.behavior = (entries) => {
      void BatchFailure.of([entries[0]!], new Error('primary store refused'));
    };
    const ids = await addOrders(redis, app.key('speculative'), 2);
    expect(await outcomesOf(app, ids)).toEqual(['acked', 'acked']);
  });

  it('a batch handler must be its stream’s only handler: a second one (batch or not, in either order) is refused at listen', async () => {
    @Controller()
    class SingleCtl {
      @EventPattern<string>('batched')
      one(@Payload() _payload: unknown, @Ctx() _ctx: RedisStreamsContext) {}
    }
    const batch = () => batchController('batched', { batch: { maxSize: 3 } });
    for (const controllers of [
      [batch(), batch()],
      [batch(), SingleCtl],
      [SingleCtl, batch()],
    ]) {
      await expect(startWith(controllers)).rejects.toThrow(/pattern "batched" has 2 handlers, one of them a batch handler: a batch handler must be its stream's only handler/);
    }
  });

  it('several single-entry handlers of one stream must agree on partitions; same partitions, or none, are accepted', async () => {
    @Controller()
    class TwoPartitions {
      @StreamPattern('parted', { partitions: 2 })
      a(@Payload() _payload: unknown) {}
    }
    @Controller()
    class TwoPartitionsToo {
      @StreamPattern('parted', { partitions: 2 })
      b(@Payload() _payload: unknown) {}
    }
    @Controller()
    class ThreePartitions {
      @StreamPattern('parted', { partitions: 3 })
      c(@Payload() _payload: unknown) {}
    }
    await expect(startWith([TwoPartitions, ThreePartitions])).rejects.toThrow(/the handlers of "parted" disagree on partitions \(2 against 3\)/);
    const app = await startWith([TwoPartitions, TwoPartitionsToo]);
    expect(app.server.options.group).toBe('g');
  });
});
