/**
 * Batch handlers inside Nest: interceptors that map results or retry, a BatchFailure made and
 * not thrown, and several handlers of one stream, against "only a thrown BatchFailure fails the
 * entries it lists, and nothing else acks an entry a handler failed".
 */
import {
  Catch,
  Controller,
  Injectable,
  UseFilters,
  UseInterceptors,
  type ArgumentsHost,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
  type RpcExceptionFilter,
} from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { BatchFailure, RedisStreamsContext, StreamPattern, type StreamBatchEntry } from 'nestjs-redis-streams';
import { defer, map, retry, throwError } from 'rxjs';
import { addOrders, BatchLog, batchController, CountingInterceptor } from './support/batch-app.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

const redis = useRedis();

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

/** A catch-all filter that normalizes every error to one shape (`batchFailures: []` by default), keeping an RpcException's fields. */
@Catch()
class NormalizeFilter implements RpcExceptionFilter {
  catch(exception: unknown, _host: ArgumentsHost) {
    const inner = exception instanceof BatchFailure ? (exception.getError() as object) : {};
    return throwError(() => ({
      status: 'error',
      message: exception instanceof Error ? exception.message : String(exception),
      batchFailures: [],
      ...inner,
    }));
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
  it('an interceptor runs once per call, not once per entry', async () => {
    const app = await startWith(
      // maxWaitMs: each call full (5 entries) however the reads split the 20.
      [
        batchController('batched', { batch: { maxSize: 5, maxWaitMs: 5_000 } }, (proto, key, d) =>
          UseInterceptors(CountingInterceptor)(proto, key, d),
        ),
      ],
      [CountingInterceptor],
    );
    await addOrders(redis, app.key('batched'), 20);
    await waitFor(() => app.settled.length === 20, { message: '20 settled entries' });
    expect(app.log.calls.map((c) => c.size)).toEqual([5, 5, 5, 5]);
    expect(app.log.intercepted).toBe(4);
  });

  it('a thrown BatchFailure fails only its entries behind an interceptor that maps results', async () => {
    const app = await startWith(
      [
        batchController('batched', { batch: { maxSize: 3, maxWaitMs: 5_000 } }, (proto, key, d) =>
          UseInterceptors(WrapInterceptor)(proto, key, d),
        ),
      ],
      [WrapInterceptor],
    );
    app.log.behavior = (entries) => {
      throw failSecond(entries);
    };
    const ids = await addOrders(redis, app.key('batched'), 3);
    expect(await outcomesOf(app, ids)).toEqual(['acked', 'failed', 'acked']);
    expect(await pendingCount(redis, app.key('batched'))).toBe(1);
  });

  it('a retry interceptor: the first try throws BatchFailure(X), the retry succeeds for all: X is acked, not run again', async () => {
    const app = await startWith(
      [
        batchController('retried', { batch: { maxSize: 2, maxWaitMs: 5_000 } }, (proto, key, d) =>
          UseInterceptors(RetryOnce)(proto, key, d),
        ),
      ],
      [RetryOnce],
    );
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

  it('a BatchFailure made for an earlier call and thrown again (a circuit breaker) fails every entry of this call', async () => {
    const app = await startWith([batchController('stale', { batch: { maxSize: 2, maxWaitMs: 5_000 } })]);
    let last: BatchFailure | undefined;
    app.log.behavior = (entries) => {
      // Open after the first failure: every later call rethrows the last error.
      if (last) throw last;
      last = BatchFailure.of([entries[0]!], new Error('downstream down'));
      throw last;
    };
    const first = await addOrders(redis, app.key('stale'), 2);
    expect(await outcomesOf(app, first)).toEqual(['failed', 'acked']);
    const second = await addOrders(redis, app.key('stale'), 2, 2);
    await waitFor(() => app.settled.length === 4, { message: 'the second batch settled' });
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect(second.map((id) => outcome[id])).toEqual(['failed', 'failed']);
  });

  it('an exception filter that reshapes every error with an empty batchFailures list fails the whole batch, never acks it', async () => {
    const app = await startWith([
      batchController('normalized', { batch: { maxSize: 2, maxWaitMs: 5_000 } }, (proto, key, d) =>
        UseFilters(NormalizeFilter)(proto, key, d),
      ),
    ]);
    app.log.behavior = () => {
      throw new Error('database down');
    };
    const ids = await addOrders(redis, app.key('normalized'), 2);
    expect(await outcomesOf(app, ids)).toEqual(['failed', 'failed']);
    expect(await pendingCount(redis, app.key('normalized'))).toBe(2);
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
      await expect(startWith(controllers)).rejects.toThrow(
        /pattern "batched" has 2 handlers, one of them a batch handler: a batch handler must be its stream's only handler/,
      );
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
    await expect(startWith([TwoPartitions, ThreePartitions])).rejects.toThrow(
      /the handlers of "parted" disagree on partitions \(2 against 3\)/,
    );
    const app = await startWith([TwoPartitions, TwoPartitionsToo]);
    expect(app.server.options.group).toBe('g');
  });
});
