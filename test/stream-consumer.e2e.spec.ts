import { lastValueFrom } from 'rxjs';
import { DeadLetterException, RetryLaterException } from 'nestjs-redis-streams';
import {
  BatchFailureError,
  DeadLetterError,
  InvalidOptionError,
  isDeadLetter,
  RetryLaterError,
  StreamBatchContext,
  StreamConsumer,
  StreamContext,
  type BatchEntry,
  type SettledEvent,
  type StreamConsumerOptions,
} from 'nestjs-redis-streams/core';
import { batchFailures } from '../libs/redis-streams/src/batch-failure-mark.js';
import { retryLaterDelay } from '../libs/redis-streams/src/retry-later-mark.js';
import { deadLetterKey } from './support/redis-server.js';
import { useProducers } from './support/producer.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

const redis = useRedis();
const startProducer = useProducers();

const consumers: StreamConsumer[] = [];
afterEach(async () => {
  await Promise.all(consumers.splice(0).map((c) => c.close()));
});

function consumer(options: StreamConsumerOptions = {}): StreamConsumer {
  const c = new StreamConsumer({
    connection: redis.connection,
    group: 'g',
    blockMs: 100,
    logger: false,
    keyPrefix: uniquePrefix(),
    ...options,
  });
  consumers.push(c);
  return c;
}

describe('StreamConsumer (nestjs-redis-streams/core)', () => {
  it("names a registration in the core's words: handle('orders'), never @StreamPattern", async () => {
    await expect(
      consumer()
        .handle('orders', () => {}, { partitions: 0 })
        .start(),
    ).rejects.toThrow(/^nestjs-redis-streams: handle\('orders'\): partitions must be/);
    const typo = { bach: { maxSize: 5 } } as never;
    await expect(
      consumer()
        .handle('orders', () => {}, typo)
        .start(),
    ).rejects.toThrow(/invalid option "handle\('orders'\) bach"/);
    await expect(
      consumer()
        .handle('orders', () => {}, { retry: { backoff: { type: 'fixed' } } as never })
        .start(),
    ).rejects.toThrow(/handle\('orders'\) retry/);
    const c = consumer().handle('orders', () => {});
    expect(() => c.handle('orders', () => {})).toThrow(/handle\('orders'\) was called twice/);
    expect(() => c.unwrap()).toThrow(/call start\(\) before unwrap\(\)/);
    await c.start();
    expect(() => c.handle('payments', () => {})).toThrow(/after start\(\)/);
    expect(c.unwrap<unknown[]>().length).toBeGreaterThanOrEqual(2);
    expect((await c.health()).state).toBe('running');
  });

  it('refuses a wrong constructor or handle() argument with an InvalidOptionError naming it', () => {
    const refused = (make: () => unknown, option: string) => {
      expect(make).toThrow(InvalidOptionError);
      expect(make).toThrow(`invalid option "${option}"`);
    };
    refused(() => new StreamConsumer(null as never), 'options');
    refused(() => new StreamConsumer({ signal: {} as never }), 'signal');
    refused(() => new StreamConsumer({ logger: 5 as never }), 'logger');
    refused(() => new StreamConsumer({ logger: { log: () => undefined } as never }), 'logger');
    const consumer = new StreamConsumer({ logger: false });
    refused(() => consumer.handle('s', () => undefined, 'batch' as never), "handle('s') extras");
    refused(() => consumer.handle('s', () => undefined, null as never), "handle('s') extras");
  });

  it('a signal aborted before start() closes it: start() rejects, nothing is left open', async () => {
    const stop = new AbortController();
    stop.abort();
    await expect(
      consumer({ signal: stop.signal })
        .handle('orders', () => {})
        .start(),
    ).rejects.toThrow(/closed before it started/);
  });

  it('a batch handler gets its entries and a batch context; a BatchFailureError fails only the entries it names, a DeadLetterError as their error dead-letters', async () => {
    const c = consumer({ minIdleMs: 60_000 });
    const key = `${c.options.keyPrefix}bulk`;
    const r = redis.client();
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await r.xadd(key, '*', 'data', JSON.stringify({ n })))!);
    const calls: { size: number; context: boolean; entries: boolean }[] = [];
    const settled: SettledEvent[] = [];
    c.on('settled', (e) => settled.push(e));
    c.handle(
      'bulk',
      (entries: BatchEntry<{ n: number }>[], ctx) => {
        calls.push({
          size: ctx.getSize(),
          context: ctx instanceof StreamBatchContext,
          entries: entries.every((e) => e.context instanceof StreamContext),
        });
        const byN = (n: number) => entries.find((e) => e.payload.n === n)!;
        throw new BatchFailureError([
          { entry: byN(2), error: new Error('two failed') },
          { entry: byN(3), error: new DeadLetterError('three refused') },
        ]);
      },
      { batch: { maxSize: 10 } },
    );
    await c.start();
    await waitFor(() => settled.length === 3, { message: 'three settled entries' });
    expect(calls).toEqual([{ size: 3, context: true, entries: true }]);
    expect(ids.map((id) => settled.find((e) => e.id === id)?.outcome)).toEqual(['acked', 'failed', 'dead-lettered']);
    expect(await pendingCount(redis, key)).toBe(1);
    expect(await r.xlen(deadLetterKey(key))).toBe(1);
  });

  it('answers a request (client.send) at once with "no handler": request-response is Nest-only', async () => {
    const c = consumer();
    c.handle('quote', () => 42);
    await c.start();
    const producer = await startProducer({ connection: redis.connection, keyPrefix: c.options.keyPrefix });
    await expect(lastValueFrom(producer.client.send('quote', {}))).rejects.toBe(
      'There is no matching message handler defined in the remote service.',
    );
  });

  it('the core errors are recognised by the marks the settle path reads, as the Nest exceptions are', () => {
    expect(isDeadLetter(new DeadLetterError('x'))).toBe(true);
    expect(isDeadLetter(new DeadLetterException('x'))).toBe(true);
    expect(isDeadLetter(new Error('x'))).toBe(false);
    expect(retryLaterDelay(new RetryLaterError(250))).toBe(250);
    expect(retryLaterDelay(new RetryLaterException(250))).toBe(250);
    const entry = { payload: 1, context: new StreamContext({} as never) };
    expect(batchFailures(BatchFailureError.of([entry], new Error('all')))?.has(entry.context)).toBe(true);
    expect(new DeadLetterError('x')).toBeInstanceOf(Error);
    expect(`${new RetryLaterError(5)}`).toBe('RetryLaterError: retry in 5 ms');
  });
});
