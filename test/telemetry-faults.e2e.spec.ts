import {
  metrics,
  propagation,
  trace,
  type Context,
  type MeterProvider as ApiMeterProvider,
  type TextMapGetter,
  type TextMapPropagator,
} from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { PullReader, useTracing } from './support/otel.js';
import { waitFor } from './support/wait-for.js';

/** Like Jaeger's propagator: decodeURIComponent on a header, so a malformed one throws URIError. */
class DecodingPropagator implements TextMapPropagator {
  inject(): void {}
  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const value = getter.get(carrier, 'uber-trace-id');
    if (typeof value === 'string') decodeURIComponent(value);
    return ctx;
  }
  fields(): string[] {
    return ['uber-trace-id'];
  }
}

const redis = useRedis({ standalone: true });
const spans = useTracing();
beforeEach(() => {
  propagation.disable();
  metrics.disable();
});

const start = useApps();
const producer = useProducers();

describe('OpenTelemetry never changes what happens to an entry', () => {
  it('a propagator that throws on an entry’s header: that entry and the rest of its batch are handled and acked on their first delivery', async () => {
    propagation.setGlobalPropagator(new DecodingPropagator());
    const prefix = uniquePrefix();
    const admin = redis.client();
    const bad = (await admin.xadd(
      `${prefix}orders`,
      '*',
      'data',
      '{"n":1}',
      'headers',
      JSON.stringify({ 'uber-trace-id': '%E0%A4%A' }),
    )) as string;
    const good = (await admin.xadd(`${prefix}orders`, '*', 'data', '{"n":2}')) as string;
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, maxDeliveries: 3, retryMaxDelayMs: 200 }));
    const errors: unknown[] = [];
    app.server.on('error', (err) => errors.push(err));
    await waitFor(() => app.settled.length === 2, { message: 'both settled' });
    expect(app.settled.map((e) => [e.id, e.outcome, e.deliveryCount]).sort()).toEqual(
      [
        [bad, 'acked', 1],
        [good, 'acked', 1],
      ].sort(),
    );
    expect(app.recorder.calls.map((c) => c.id).sort()).toEqual([bad, good].sort());
    expect(errors).toEqual([]);
    expect((await app.server.health({ stats: false })).redisDownForMs).toBe(0);
  });

  it('a meter provider that throws: the consumer starts and handles entries all the same', async () => {
    const broken = {
      getMeter: () => {
        throw new Error('meter provider broken');
      },
    } as unknown as ApiMeterProvider;
    metrics.setGlobalMeterProvider(broken);
    const app = await start(consumerOptions(redis, { blockMs: 50 }));
    await redis.client().xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.settled.length === 1, { message: 'the entry settled' });
    expect(app.settled[0]!.outcome).toBe('acked');
  });
});

describe('OpenTelemetry context and figures', () => {
  it('the client’s reply loop, started by a send inside a request’s span, does not run inside that trace', async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const seen: { command: string; traceId: string | undefined }[] = [];
    const original = Redis.prototype.sendCommand;
    Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
      // What @opentelemetry/instrumentation-ioredis sees: the active span when a command is sent.
      seen.push({ command: String((args[0] as { name?: string }).name), traceId: trace.getActiveSpan()?.spanContext().traceId });
      return original.apply(this, args);
    };
    onTestFinished(() => void (Redis.prototype.sendCommand = original));
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50 }), { controllers: [RequestsController] });
    app.recorder.behavior = () => 'ok';
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, replyBlockMs: 100 });
    const request = await trace.getTracer('app').startActiveSpan('checkout', async (span) => {
      await lastValueFrom(client.send('quote', { n: 1 }));
      span.end();
      return span.spanContext().traceId;
    });
    const before = seen.length;
    // The reply loop keeps reading (BLOCK 100): wait for several of its reads after the request ended.
    await waitFor(() => seen.slice(before).filter((s) => s.command.toLowerCase() === 'xread').length >= 3, {
      message: 'reply reads after the request',
    });
    const afterwards = seen.slice(before);
    expect(afterwards.filter((s) => s.traceId === request).map((s) => s.command)).toEqual([]);
  });

  it('consumed messages count an outcome only once it is final: an entry whose handler close() abandoned is not an "acked"', async () => {
    const reader = new PullReader();
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    const app = await start(consumerOptions(redis, { blockMs: 50, shutdownTimeoutMs: 100 }));
    let release!: () => void;
    app.recorder.behavior = () => new Promise<void>((resolve) => (release = resolve));
    const admin = redis.client();
    await admin.xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the entry in hand' });
    await app.close();
    // The handler finishes after close() gave up on it: nothing is acked, the entry stays pending.
    release();
    const process = await waitFor(() => spans.getFinishedSpans().find((s) => s.name === `process ${app.key()}`), {
      message: 'the late span',
    });
    expect(process.attributes['messaging.redis_streams.outcome']).toBe('acked');
    expect(((await admin.xpending(app.key(), 'g')) as [number])[0]).toBe(1);
    const { resourceMetrics } = await reader.collect();
    const consumed = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === 'messaging.redis_streams.consumed.messages');
    expect((consumed?.dataPoints ?? []).filter((p) => p.attributes['messaging.destination.name'] === app.key())).toEqual([]);
    expect(app.settled).toEqual([]);
  });
});
