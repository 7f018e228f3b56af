import { context, metrics, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { DataPointType, MeterProvider, type HistogramMetricData, type MetricData } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { RpcException } from '@nestjs/microservices';
import { RedisStreamsRecord } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { consumerOptions } from './support/consumer-options.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { disableOtelGlobals, PullReader } from './support/otel.js';
import { gate } from './support/gate.js';
import { waitFor } from './support/wait-for.js';
import { BatchLog, batchController } from './support/batch-app.js';

const spans = new InMemorySpanExporter();
const reader = new PullReader();
const tracerProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] });
const meterProvider = new MeterProvider({ readers: [reader] });
const contextManager = new AsyncLocalStorageContextManager();

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
  // What an app's NodeSDK does: a context manager, the W3C propagator, a tracer and a meter provider.
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
});
afterAll(async () => {
  disableOtelGlobals();
  await redis?.stop();
});
beforeEach(() => spans.reset());

const start = useApps();
const producer = useProducers();
const tracer = trace.getTracer('test');

const spanNamed = (name: string) => spans.getFinishedSpans().filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

async function collect(name: string): Promise<MetricData | undefined> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
}

/** The data points of a metric whose destination is `stream`, keyed by outcome (or by nothing). */
function pointsOf(metric: MetricData | undefined, stream: string) {
  return (metric?.dataPoints ?? []).filter((p) => p.attributes['messaging.destination.name'] === stream);
}

describe('OpenTelemetry traces', () => {
  it('a client emit in one app and the handler in another share one trace: send is the parent of process, process of the handler’s spans', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { consumer: 'c1', keyPrefix: prefix, blockMs: 100 }));
    app.recorder.behavior = () => tracer.startActiveSpan('handler work', (span) => span.end());
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });

    const { id, requestSpan } = await tracer.startActiveSpan('checkout', async (span) => {
      const emitted = await lastValueFrom(client.emit('orders', new RedisStreamsRecord({ n: 1 }, { tenant: 'a' })));
      span.end();
      return { id: emitted as string, requestSpan: span };
    });
    // The process span ends after the XACK, so after the handler's own span.
    await waitFor(() => spanNamed('handler work').length === 1 && spanNamed(`process ${app.key()}`).length === 1, {
      message: 'the handler and process spans',
    });

    const [send] = spanNamed(`send ${app.key()}`);
    const [process] = spanNamed(`process ${app.key()}`);
    const [work] = spanNamed('handler work');
    const traceId = requestSpan.spanContext().traceId;
    expect([send!.spanContext().traceId, process!.spanContext().traceId, work!.spanContext().traceId]).toEqual([traceId, traceId, traceId]);
    expect(parentOf(send!)).toBe(requestSpan.spanContext().spanId);
    expect(parentOf(process!)).toBe(send!.spanContext().spanId);
    expect(parentOf(work!)).toBe(process!.spanContext().spanId);
    expect(send!.kind).toBe(SpanKind.PRODUCER);
    expect(process!.kind).toBe(SpanKind.CONSUMER);
    expect(send!.attributes).toMatchObject({
      'messaging.system': 'redis',
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
      'messaging.destination.name': app.key(),
      'messaging.message.id': id,
    });
    expect(process!.attributes).toMatchObject({
      'messaging.system': 'redis',
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
      'messaging.destination.name': app.key(),
      'messaging.consumer.group.name': 'g',
      'messaging.client.id': 'c1',
      'messaging.message.id': id,
      'messaging.redis_streams.delivery_count': 1,
      'messaging.redis_streams.delivery_source': 'new',
      'messaging.redis_streams.outcome': 'acked',
    });
    expect(process!.status.code).toBe(SpanStatusCode.UNSET);
    // The producer's own headers travel beside the trace context.
    expect(app.recorder.calls[0]!.headers).toMatchObject({ tenant: 'a', traceparent: expect.stringContaining(send!.spanContext().spanId) });
  });

  it('a batch handler’s call has one process span linking each entry’s send span; the handler’s own spans are its children', async () => {
    const prefix = uniquePrefix();
    const Ctl = batchController('batched', { batch: { maxSize: 5, maxWaitMs: 2000 } });
    const app = await start(consumerOptions(redis, { consumer: 'c1', keyPrefix: prefix, blockMs: 100 }), {
      controllers: [Ctl],
      providers: [BatchLog],
    });
    app.app.get(BatchLog).behavior = () => tracer.startActiveSpan('batch work', (span) => span.end());
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    for (let n = 1; n <= 5; n++) await lastValueFrom(client.emit('batched', { n }));
    const key = app.key('batched');
    const batchSpans = () => spanNamed(`process ${key}`).filter((s) => s.attributes['messaging.batch.message_count'] !== undefined);
    await waitFor(() => app.settled.length === 5 && batchSpans().length === 1, { message: 'the batch call’s span' });
    const [call] = batchSpans();
    const sends = spanNamed(`send ${key}`);
    expect(sends).toHaveLength(5);
    expect(call!.kind).toBe(SpanKind.CONSUMER);
    expect(call!.attributes).toMatchObject({
      'messaging.system': 'redis',
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
      'messaging.destination.name': key,
      'messaging.consumer.group.name': 'g',
      'messaging.client.id': 'c1',
      'messaging.batch.message_count': 5,
    });
    // The conventions' batch shape: links to the producers' contexts (five traces), not one of them as parent.
    expect(parentOf(call!)).toBeUndefined();
    expect(call!.links.map((l) => l.context.spanId).sort()).toEqual(sends.map((s) => s.spanContext().spanId).sort());
    const [work] = spanNamed('batch work');
    expect(parentOf(work!)).toBe(call!.spanContext().spanId);
  });

  it('a failed then retried entry shows two process spans, delivery counts 1 and 2, the failure recorded, both children of the one send', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, minIdleMs: 200 }));
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new RpcException('payment service down');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    await lastValueFrom(client.emit('orders', { n: 1 }));
    await waitFor(() => app.settled.some((e) => e.outcome === 'acked'), { message: 'the retry acked' });
    await waitFor(() => spanNamed(`process ${app.key()}`).length === 2, { message: 'two process spans' });

    const [send] = spanNamed(`send ${app.key()}`);
    const [first, second] = spanNamed(`process ${app.key()}`).sort(
      (a, b) =>
        Number(a.attributes['messaging.redis_streams.delivery_count']) - Number(b.attributes['messaging.redis_streams.delivery_count']),
    );
    expect(first!.attributes).toMatchObject({
      'messaging.redis_streams.delivery_count': 1,
      'messaging.redis_streams.delivery_source': 'new',
      'messaging.redis_streams.outcome': 'failed',
    });
    expect(first!.status.code).toBe(SpanStatusCode.ERROR);
    expect(first!.events.find((e) => e.name === 'exception')?.attributes).toMatchObject({ 'exception.message': 'payment service down' });
    expect(second!.attributes).toMatchObject({
      'messaging.redis_streams.delivery_count': 2,
      'messaging.redis_streams.delivery_source': 'reclaim',
      'messaging.redis_streams.outcome': 'acked',
    });
    expect(second!.status.code).toBe(SpanStatusCode.UNSET);
    for (const p of [first!, second!]) {
      expect(p.spanContext().traceId).toBe(send!.spanContext().traceId);
      expect(parentOf(p)).toBe(send!.spanContext().spanId);
    }
  });

  it('a request carries its correlation id as conversation id; an entry another producer wrote (no headers) starts a trace of its own', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50 }), { controllers: [RequestsController] });
    app.recorder.behavior = () => 'ok';
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    expect(await lastValueFrom(client.send('quote', { n: 1 }))).toBe('ok');
    // The answer can arrive before the XADD reply that ends the send span.
    await waitFor(() => spanNamed(`process ${prefix}quote`).length === 1 && spanNamed(`send ${prefix}quote`).length === 1, {
      message: 'the request spans',
    });
    const [send] = spanNamed(`send ${prefix}quote`);
    const [process] = spanNamed(`process ${prefix}quote`);
    const conversation = app.recorder.calls[0]!.fields.correlationId;
    expect(conversation).toBeTruthy();
    expect(send!.attributes['messaging.message.conversation_id']).toBe(conversation);
    expect(process!.attributes['messaging.message.conversation_id']).toBe(conversation);
    expect(parentOf(process!)).toBe(send!.spanContext().spanId);

    const rawId = (await redis.client().xadd(app.key(), '*', 'order_id', '1001')) as string;
    await waitFor(() => spanNamed(`process ${app.key()}`).length === 1, { message: 'the raw entry span' });
    const [raw] = spanNamed(`process ${app.key()}`);
    expect(raw!.attributes['messaging.message.id']).toBe(rawId);
    expect(parentOf(raw!)).toBeUndefined();
    expect(raw!.spanContext().traceId).not.toBe(send!.spanContext().traceId);
  });

  it('an undecodable entry gets a process span saying it was dead-lettered, with the error', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50 }));
    await redis.client().xadd(app.key(), '*', 'data', '{not json');
    await waitFor(() => spanNamed(`process ${app.key()}`).length === 1, { message: 'the span' });
    const [span] = spanNamed(`process ${app.key()}`);
    expect(span!.attributes).toMatchObject({ 'messaging.redis_streams.outcome': 'dead-lettered', 'error.type': 'EntryDecodeError' });
    expect(span!.attributes['messaging.redis_streams.dead_letter_id']).toMatch(/^\d+-\d+$/);
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('an entry refused before decoding (too large) still has the producer’s send span as parent', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, maxEntryBytes: 200 }));
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    await lastValueFrom(client.emit('orders', { blob: 'x'.repeat(500) }));
    await waitFor(() => spanNamed(`process ${app.key()}`).length === 1, { message: 'the span' });
    const [send] = spanNamed(`send ${app.key()}`);
    const [span] = spanNamed(`process ${app.key()}`);
    expect(span!.attributes['messaging.redis_streams.outcome']).toBe('dead-lettered');
    expect(parentOf(span!)).toBe(send!.spanContext().spanId);
  });

  it('telemetry: false reports nothing, on either side', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, telemetry: false }));
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, telemetry: false });
    await lastValueFrom(client.emit('orders', { n: 1 }));
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the entry handled' });
    await waitFor(() => app.settled.length === 1, { message: 'the entry settled' });
    expect(spans.getFinishedSpans().filter((s) => s.name.endsWith(app.key()))).toEqual([]);
    expect(app.recorder.calls[0]!.headers).toEqual({});
  });
});

describe('OpenTelemetry metrics', () => {
  it('consumed messages by outcome and process durations match the work done', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, maxDeliveries: 1 }));
    app.recorder.behavior = (call) => {
      if ((call.payload as { n: number }).n % 4 === 0) throw new Error('poison');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    for (let n = 1; n <= 20; n++) await lastValueFrom(client.emit('orders', { n }));
    await waitFor(() => app.settled.length === 20, { message: '20 entries settled' });

    const consumed = pointsOf(await collect('messaging.redis_streams.consumed.messages'), app.key());
    const byOutcome = Object.fromEntries(consumed.map((p) => [p.attributes['messaging.redis_streams.outcome'], p.value]));
    expect(byOutcome).toEqual({ acked: 15, 'dead-lettered': 5 });
    expect(consumed.find((p) => p.attributes['messaging.redis_streams.outcome'] === 'dead-lettered')!.attributes).toMatchObject({
      'messaging.consumer.group.name': 'g',
      'messaging.operation.name': 'process',
      // The handler's own Error, not the { status, message } Nest's default filter puts in its place.
      'error.type': 'Error',
    });
    const duration = (await collect('messaging.redis_streams.process.duration_seconds')) as HistogramMetricData;
    expect(duration.descriptor.unit).toBe('s');
    expect(duration.dataPointType).toBe(DataPointType.HISTOGRAM);
    const histograms = pointsOf(duration, app.key()) as HistogramMetricData['dataPoints'];
    expect(histograms.reduce((n, p) => n + p.value.count, 0)).toBe(20);
    expect(histograms[0]!.value.buckets.boundaries).toContain(0.005);
  });

  it('a failed entry: its span and messaging.redis_streams.retry.delay_seconds say when it is tried again', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50, retry: { backoff: { type: 'fixed', delayMs: 60_000 } } }));
    app.recorder.behavior = () => {
      throw new Error('downstream down');
    };
    await redis.client().xadd(app.key(), '*', 'data', '1');
    await waitFor(() => app.settled.length === 1 && spanNamed(`process ${app.key()}`).length === 1, {
      message: 'the failure and its span',
    });
    const [span] = spanNamed(`process ${app.key()}`);
    expect(span!.attributes).toMatchObject({ 'messaging.redis_streams.outcome': 'failed', 'messaging.redis_streams.retry_in_ms': 60_000 });
    const delay = (await collect('messaging.redis_streams.retry.delay_seconds')) as HistogramMetricData;
    expect(delay.descriptor.unit).toBe('s');
    const points = pointsOf(delay, app.key()) as HistogramMetricData['dataPoints'];
    expect(points.map((p) => [p.attributes['messaging.redis_streams.outcome'], p.value.count, p.value.sum])).toEqual([['failed', 1, 60]]);
  });

  it('stuck-entry gauges: an entry in hand past stuckEntryMs counts in messaging.redis_streams.stuck, with the oldest handler’s age; 0 once it settles', async () => {
    const { wait: released, open: release } = gate();
    onTestFinished(() => release());
    const app = await start(consumerOptions(redis, { blockMs: 50, stuckEntryMs: 200 }));
    app.recorder.behavior = () => released;
    await redis.client().xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the entry in hand' });
    const stuck = await waitFor(
      async () => {
        const points = pointsOf(await collect('messaging.redis_streams.stuck'), app.key());
        return points[0]?.value === 1 && points;
      },
      { message: 'the stuck gauge at 1' },
    );
    expect(stuck[0]!.attributes).toEqual({
      'messaging.system': 'redis',
      'messaging.destination.name': app.key(),
      'messaging.consumer.group.name': 'g',
    });
    const age = pointsOf(await collect('messaging.redis_streams.handler.oldest_age_seconds'), app.key());
    expect(age[0]!.value as number).toBeGreaterThanOrEqual(0.2);
    release();
    await waitFor(() => app.settled.length === 1, { message: 'the entry settled' });
    expect(pointsOf(await collect('messaging.redis_streams.stuck'), app.key()).map((p) => p.value)).toEqual([0]);
    expect(pointsOf(await collect('messaging.redis_streams.handler.oldest_age_seconds'), app.key()).map((p) => p.value)).toEqual([0]);
  });

  it('lag and pending gauges per stream and group match XINFO GROUPS', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    // Written before the consumer starts: its first read takes a full batch of 5, 7 are left.
    for (let n = 0; n < 12; n++) await admin.xadd(`${prefix}payments`, '*', 'n', String(n));
    const { wait: released, open: release } = gate();
    onTestFinished(() => release());
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, batchSize: 5, readAhead: false }));
    app.recorder.behavior = () => released;
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the first entry in hand' });

    const [info] = (await admin.xinfo('GROUPS', app.key('payments'))) as unknown[][];
    const row = Object.fromEntries(Array.from({ length: info!.length / 2 }, (_, i) => [info![2 * i], info![2 * i + 1]]));
    expect([row.lag, row.pending]).toEqual([7, 5]);
    const lag = pointsOf(await collect('messaging.redis_streams.lag'), app.key('payments'));
    const pending = pointsOf(await collect('messaging.redis_streams.pending'), app.key('payments'));
    expect(lag.map((p) => p.value)).toEqual([7]);
    expect(pending.map((p) => p.value)).toEqual([5]);
    expect(lag[0]!.attributes).toEqual({
      'messaging.system': 'redis',
      'messaging.destination.name': app.key('payments'),
      'messaging.consumer.group.name': 'g',
    });
    // How old the figures are: what tells a frozen reading from a fresh one (an exporter repeats the last values).
    const age =
      (await collect('messaging.redis_streams.stats.age_seconds'))?.dataPoints.filter(
        (p) => p.attributes['messaging.consumer.group.name'] === 'g',
      ) ?? [];
    expect(age.length).toBeGreaterThan(0);
    expect(age.every((p) => typeof p.value === 'number' && p.value >= 0 && p.value < 10)).toBe(true);
    release();
    await waitFor(() => app.settled.length === 12, { message: 'all settled' });
  });
});
