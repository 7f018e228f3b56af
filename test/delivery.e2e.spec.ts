import {
  Catch,
  Controller,
  Injectable,
  UseFilters,
  UseInterceptors,
  type RpcExceptionFilter,
  type ArgumentsHost,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { BaseRpcExceptionFilter, Ctx, Payload } from '@nestjs/microservices';
import { RedisStreamsContext, StreamPattern } from 'nestjs-redis-streams';
import { EMPTY, map, tap, throwError, timer } from 'rxjs';
import { useRedis } from './support/use-redis.js';
import { CORE_HOST, Recorder, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';
import { preloadOrders } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

describe('delivery and settle', () => {
  // Nest-only (TEST_HOST=core builds no Nest module): dependency injection, Observables, interceptors, filters, hooks.
  it.skipIf(CORE_HOST)('injects providers into controllers (decorator metadata is emitted under the test build)', async () => {
    const app = await start({ connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), blockMs: 200 });
    expect(app.app.get(Recorder)).toBeInstanceOf(Recorder);
    // The controller received the same Recorder: a call reaches it.
    await redis.client().xadd(app.key(), '*', 'k', 'v');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the handler to record the call' });
  });

  it('dispatches redis-cli field maps and JSON `data` entries to the right handler with payload and context, then acks', async () => {
    const app = await start({ connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: uniquePrefix(), blockMs: 200 });
    const r = redis.client();
    const plainId = await r.xadd(app.key('orders'), '*', 'order_id', '1001', 'status', 'pending');
    const jsonId = await r.xadd(app.key('payments'), '*', 'data', JSON.stringify({ amount: 12.5, tags: ['a'], nested: { ok: true } }));
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 2, { message: 'two acked entries' });

    const orders = app.recorder.calls.find((c) => c.pattern === 'orders')!;
    expect(orders).toMatchObject({
      payload: { order_id: '1001', status: 'pending' },
      id: plainId,
      stream: app.key('orders'),
      group: 'g',
      consumer: 'c1',
      deliveryCount: 1,
      fields: { order_id: '1001', status: 'pending' },
    });
    const payments = app.recorder.calls.find((c) => c.pattern === 'payments')!;
    expect(payments).toMatchObject({
      payload: { amount: 12.5, tags: ['a'], nested: { ok: true } },
      id: jsonId,
      stream: app.key('payments'),
    });
    expect(await pendingCount(redis, app.key('orders'))).toBe(0);
    expect(await pendingCount(redis, app.key('payments'))).toBe(0);
  });

  it('leaves a failed entry pending, re-delivers it after minIdleMs with delivery count 2, and acks it once the handler succeeds', async () => {
    const app = await start({ connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100, minIdleMs: 300 });
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error('transient failure');
    };
    const id = await redis.client().xadd(app.key(), '*', 'order_id', '7');
    await waitFor(() => app.settled.some((e) => e.outcome === 'failed'), { message: 'the first delivery to fail' });
    expect(await pendingCount(redis, app.key())).toBe(1);

    await waitFor(() => app.settled.some((e) => e.outcome === 'acked'), { message: 'the re-delivery to be acked' });
    expect(app.recorder.calls.map((c) => [c.id, c.deliveryCount])).toEqual([
      [id, 1],
      [id, 2],
    ]);
    expect(app.settled.map((e) => [e.outcome, e.source])).toEqual([
      ['failed', 'new'],
      ['acked', 'reclaim'],
    ]);
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it.skipIf(CORE_HOST)('treats an errored Observable and a rejected Promise as failures, a completed Observable as success', async () => {
    const app = await start({ connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100, minIdleMs: 60_000 });
    app.recorder.behavior = (call) => {
      const kind = (call.payload as { kind: string }).kind;
      if (kind === 'observable-error') return throwError(() => new Error('stream failed'));
      if (kind === 'promise-reject') return Promise.reject(new Error('rejected'));
      return timer(5).pipe(map(() => 1)); // an async stream that completes
    };
    const r = redis.client();
    for (const kind of ['observable-error', 'promise-reject', 'observable-ok']) await r.xadd(app.key(), '*', 'kind', kind);
    await waitFor(() => app.settled.length === 3, { message: 'three settled entries' });
    expect(app.settled.map((e) => e.outcome)).toEqual(['failed', 'failed', 'acked']);
    expect(await pendingCount(redis, app.key())).toBe(2);
  });

  it.skipIf(CORE_HOST)('keeps Nest interceptors, exception filters and processing hooks working', async () => {
    const events: string[] = [];
    @Injectable()
    class Audit implements NestInterceptor {
      intercept(_ctx: ExecutionContext, next: CallHandler) {
        events.push('interceptor:before');
        return next.handle().pipe(tap({ complete: () => events.push('interceptor:after') }));
      }
    }
    @Catch()
    class Swallow implements RpcExceptionFilter {
      catch(err: Error, host: ArgumentsHost) {
        events.push(`filter:${err.message}`);
        // "handled": a filter that returns a completed stream turns a failure into success.
        return err.message === 'swallow me' ? EMPTY : new BaseRpcExceptionFilter().catch(err, host);
      }
    }
    @Controller()
    class Audited {
      @StreamPattern('audited')
      @UseInterceptors(Audit)
      @UseFilters(Swallow)
      handle(@Payload() p: { fail?: string }, @Ctx() ctx: RedisStreamsContext) {
        events.push(`handler:${ctx.getPattern()}`);
        if (p.fail) throw new Error(p.fail);
      }
    }
    const prefix = uniquePrefix();
    const moduleApp = await start(
      { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 },
      { controllers: [Audited] },
    );
    moduleApp.server.setOnProcessingStartHook((_t, _c, done) => {
      events.push('hook:start');
      return done();
    });
    moduleApp.server.setOnProcessingEndHook(() => events.push('hook:end'));

    const r = redis.client();
    await r.xadd(`${prefix}audited`, '*', 'data', '{}');
    await waitFor(() => moduleApp.settled.length === 1, { message: 'first audited entry' });
    await r.xadd(`${prefix}audited`, '*', 'data', '{"fail":"swallow me"}');
    await waitFor(() => moduleApp.settled.length === 2, { message: 'second audited entry' });
    await r.xadd(`${prefix}audited`, '*', 'data', '{"fail":"boom"}');
    await waitFor(() => moduleApp.settled.length === 3, { message: 'third audited entry' });

    expect(moduleApp.settled.map((e) => e.outcome)).toEqual(['acked', 'acked', 'failed']);
    expect(events.slice(0, 5)).toEqual(['hook:start', 'interceptor:before', 'handler:audited', 'interceptor:after', 'hook:end']);
    expect(events).toContain('filter:swallow me');
    expect(events).toContain('filter:boom');
    expect(events.filter((e) => e === 'hook:start').length).toBe(3);
    expect(events.filter((e) => e === 'hook:end').length).toBe(3);
  });

  it('gives reclaimed entries their exact delivery count, even among many failing entries of its own in the same id range', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const r = redis.client();
    const ids = await preloadOrders(r, prefix, 40);
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 40, 'STREAMS', key, '>');
    // Two entries in the middle belong to a dead peer: delivered 3 times, idle for long.
    const [a, b] = [ids[5]!, ids[15]!];
    await r.xclaim(key, 'g', 'dead', 0, a, b, 'IDLE', 1_000_000_000, 'RETRYCOUNT', 3, 'JUSTID');
    // "c" restarts: its own 38 fail again (pending around a and b); reclaiming a and b makes their 4th delivery.
    const app = await start({
      connection: redis.connection,
      group: 'g',
      consumer: 'c',
      keyPrefix: prefix,
      batchSize: 2,
      blockMs: 50,
      minIdleMs: 600_000,
      maxDeliveries: 3,
    });
    app.recorder.behavior = () => {
      throw new Error('still failing');
    };
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 2, {
      message: 'the twice-reclaimed entries dead-lettered',
    });
    // Past maxDeliveries: dead-lettered unrun, with Redis' count, never a default of 1.
    expect(app.recorder.idsOf()).not.toContain(a);
    expect(app.recorder.idsOf()).not.toContain(b);
    expect(app.settled.filter((e) => e.source === 'reclaim').map((e) => [e.id, e.deliveryCount, e.outcome])).toEqual([
      [a, 4, 'dead-lettered'],
      [b, 4, 'dead-lettered'],
    ]);
    expect(app.recorder.calls.filter((c) => c.id !== a && c.id !== b).every((c) => c.deliveryCount === 2)).toBe(true);
  });
});
