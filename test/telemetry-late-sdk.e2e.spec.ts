import { metrics, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { disableOtelGlobals, PullReader } from './support/otel.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
// No other file inherits the OpenTelemetry globals this one sets.
afterAll(() => disableOtelGlobals());

const start = useApps();
const producer = useProducers();

describe('OpenTelemetry registered after the transport started', () => {
  it('reports nothing (no headers written) without an SDK, then spans and metrics once the app registers one', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50 }));
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    await lastValueFrom(client.emit('orders', { n: 1 }));
    await waitFor(() => app.settled.length === 1, { message: 'the first entry settled' });
    // The API is installed, no SDK: not even a no-op span's context travels.
    expect(app.recorder.calls[0]!.headers).toEqual({});

    const spans = new InMemorySpanExporter();
    const reader = new PullReader();
    // What an SDK's start() registers.
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }));
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    // Each side notices within a second: emit until an entry's process span is the child of its send span.
    const childOfSend = () => {
      const finished = spans.getFinishedSpans();
      return finished.find(
        (p) =>
          p.name === `process ${app.key()}` &&
          finished.some((s) => s.name === `send ${app.key()}` && s.spanContext().spanId === p.parentSpanContext?.spanId),
      );
    };
    await waitFor(
      async () => {
        await lastValueFrom(client.emit('orders', { n: 2 }));
        return childOfSend();
      },
      { intervalMs: 200, message: 'a process span, child of its send span, after the SDK was registered' },
    );
    const { resourceMetrics } = await reader.collect();
    const names = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.descriptor.name));
    expect(names).toEqual(
      expect.arrayContaining([
        'messaging.redis_streams.process.duration_seconds',
        'messaging.redis_streams.consumed.messages',
        'messaging.redis_streams.lag',
        'messaging.redis_streams.pending',
      ]),
    );
  });
});
