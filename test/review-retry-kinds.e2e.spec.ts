import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import { REDIS_STREAMS_TRANSPORT, RedisStreamsContext, RetryLaterException, type RedisStreamsServerOptions } from 'nestjs-redis-streams';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { useProducers } from './support/producer.js';
import { Recorder, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();
const producers = useProducers();

const lines = () => {
  const all: string[] = [];
  const keep = (m: unknown) => all.push(String(m));
  return { all, logger: { log: keep, warn: keep, error: keep, debug: () => {}, verbose: () => {} } };
};

const base = (prefix: string, extra: Partial<RedisStreamsServerOptions> = {}): RedisStreamsServerOptions => ({
  connection: redis.connection,
  group: 'g',
  keyPrefix: prefix,
  blockMs: 200,
  minIdleMs: 1500,
  leaseRenewMs: 300,
  ...extra,
});

@Controller()
class QuoteController {
  constructor(private readonly recorder: Recorder) {}
  @MessagePattern('quote', REDIS_STREAMS_TRANSPORT)
  quote(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }
}

describe('review: bad policies, request handlers, batch calls', () => {
  for (const [name, backoff] of [
    [
      'throws',
      () => {
        throw new Error('policy bug');
      },
    ],
    ['NaN', () => NaN],
    ['negative', () => -5],
    ['a string', () => '100' as unknown as number],
    ['1e15', () => 1e15],
  ] as const) {
    it(`policy function that returns/does ${name}: the loop goes on, the entry is retried (not lost), nothing else stalls`, async () => {
      const prefix = uniquePrefix();
      const log = lines();
      const app = await start(base(prefix, { retry: { backoff: backoff as never } }), { logger: log.logger as never });
      app.recorder.behavior = (call) => {
        if ((call.payload as { n: number }).n === 1 && call.deliveryCount === 1) throw new Error('fails once');
      };
      const key = app.key();
      const a = (await redis.client().xadd(key, '*', 'data', '{"n":1}'))!;
      await waitFor(() => app.settled.some((e) => e.id === a && e.outcome === 'failed'), { message: 'failed' });
      const b = (await redis.client().xadd(key, '*', 'data', '{"n":2}'))!;
      await waitFor(() => app.settled.some((e) => e.id === b && e.outcome === 'acked'), { message: 'b handled' });
      const ev = app.settled.find((e) => e.id === a)!;
      console.log(name, 'retryInMs', ev.retryInMs, '|', log.all.filter((l) => l.includes(a)).join(' || '));
      if (name !== '1e15') {
        await waitFor(() => app.settled.some((e) => e.id === a && e.outcome === 'acked'), { message: 'a retried', timeoutMs: 8000 });
      } else {
        expect(ev.retryInMs).toBe(86_400_000);
      }
    }, 20_000);
  }

  for (const bad of [NaN, -1, Infinity, 1.5]) {
    it(`RetryLaterException(${bad}): falls back to the policy, retried`, async () => {
      const prefix = uniquePrefix();
      const log = lines();
      const app = await start(base(prefix, { retry: { backoff: { type: 'fixed', delayMs: 200 } } }), { logger: log.logger as never });
      app.recorder.behavior = (call) => {
        if (call.deliveryCount === 1) throw new RetryLaterException(bad);
      };
      const a = (await redis.client().xadd(app.key(), '*', 'data', '{"n":1}'))!;
      await waitFor(() => app.settled.some((e) => e.id === a && e.outcome === 'acked'), { message: 'a retried', timeoutMs: 8000 });
      console.log('RetryLater', bad, app.settled.map((e) => `${e.outcome}:${e.retryInMs}`).join(' '));
    });
  }

  it('delay 0, always failing, maxDeliveries 5: five deliveries 1..5 then dead-lettered, record gone', async () => {
    const prefix = uniquePrefix();
    const app = await start(base(prefix, { retry: { backoff: { type: 'fixed', delayMs: 0 } } }));
    app.recorder.behavior = () => {
      throw new Error('always');
    };
    const a = (await redis.client().xadd(app.key(), '*', 'data', '{"n":1}'))!;
    await waitFor(() => app.settled.some((e) => e.id === a && e.outcome === 'dead-lettered'), { message: 'dead' });
    expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 2, 3, 4, 5]);
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(0);
  });

  it('a request handler (@MessagePattern) failing once with a policy: the caller gets one answer, the handler runs how often?', async () => {
    const prefix = uniquePrefix();
    const log = lines();
    const app = await start(base(prefix, { retry: { backoff: { type: 'fixed', delayMs: 300 } } }), {
      controllers: [QuoteController],
      logger: log.logger as never,
    });
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error('quote down');
      return 42;
    };
    const p = await producers({ connection: redis.connection, keyPrefix: prefix });
    let answer: unknown;
    try {
      answer = await lastValueFrom(p.client.send('quote', { n: 1 }));
    } catch (e) {
      answer = `error: ${JSON.stringify(e)}`;
    }
    await new Promise((r) => setTimeout(r, 1500));
    console.log(
      'request answer',
      answer,
      'calls',
      app.recorder.calls.map((c) => c.deliveryCount),
      app.settled.map((e) => `${e.outcome}:${e.retryInMs}`),
    );
    console.log(log.all.filter((l) => /quote/.test(l)).join('\n'));
    expect(await redis.client().xpending(app.key('quote'), 'g', '-', '+', 10)).toEqual([]);
  });

  it('a batch handler whose whole call throws, with a policy: every entry retried once at its delay, count 2', async () => {
    const prefix = uniquePrefix();
    const Ctl = batchController('batched', { batch: { maxSize: 5, maxWaitMs: 200 }, retry: { backoff: { type: 'fixed', delayMs: 300 } } });
    const app = await start(base(prefix, { minIdleMs: 60_000, leaseRenewMs: 10_000 }), { controllers: [Ctl], providers: [BatchLog] });
    const batches = app.app.get(BatchLog);
    batches.behavior = (entries) => {
      if (entries.some((e) => e.context.getDeliveryCount() === 1)) throw new Error('whole call down');
    };
    const ids = await addOrders(redis, app.key('batched'), 5);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 5, { message: 'all acked', timeoutMs: 8000 });
    for (const id of ids)
      expect(app.settled.filter((e) => e.id === id).map((e) => [e.outcome, e.deliveryCount, e.retryInMs])).toEqual([
        ['failed', 1, 300],
        ['acked', 2, undefined],
      ]);
  });

  it('two consumers, different policies (rolling deploy): the one that failed it decides; graceful stop of it, the peer retries at due, once', async () => {
    const prefix = uniquePrefix();
    const a = await start(base(prefix, { consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 2500 } } }));
    const key = a.key();
    a.recorder.behavior = () => {
      throw new Error('old version fails');
    };
    const id = (await redis.client().xadd(key, '*', 'data', '{"n":1}'))!;
    await waitFor(() => a.settled.some((e) => e.id === id && e.outcome === 'failed'), { message: 'failed on a' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    const b = await start(base(prefix, { consumer: 'b', retry: { backoff: { type: 'fixed', delayMs: 100 } } }));
    const at: number[] = [];
    b.recorder.behavior = async () => {
      const [s, us] = (await redis.client().time()) as unknown as [string, string];
      at.push(Number(s) * 1000 + Math.floor(Number(us) / 1000));
    };
    await a.close();
    await waitFor(() => b.settled.some((e) => e.id === id && e.outcome === 'acked'), { message: 'b retried it', timeoutMs: 10_000 });
    expect(b.recorder.calls.map((c) => c.deliveryCount)).toEqual([2]);
    expect(at[0]! - due).toBeGreaterThanOrEqual(-5);
    console.log('rolling: late by', at[0]! - due, 'ms');
  }, 20_000);
});
