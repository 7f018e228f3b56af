/** Batch handlers check for an OpenTelemetry SDK once per batch: one registered late is still seen (within about a second), and then every entry is traced. */
import { metrics, trace } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { useApps } from './support/test-app.js';
import { disableOtelGlobals, PullReader } from './support/otel.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
// No other file inherits the OpenTelemetry globals this one sets.
afterAll(() => disableOtelGlobals());
const start = useApps();

describe('telemetry: a late SDK with a batch handler', () => {
  it('no spans before; process spans for every entry of calls made about a second after registration', async () => {
    const Ctl = batchController('batched', { batch: { maxSize: 10, maxWaitMs: 20 } });
    const app = await start(consumerOptions(redis, { consumer: 'c1', blockMs: 50 }), { controllers: [Ctl], providers: [BatchLog] });
    await addOrders(redis, app.key('batched'), 5);
    await waitFor(() => app.settled.length === 5, { message: 'first five' });
    const spans = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }));
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new PullReader()] }));
    let n = 5;
    await waitFor(
      async () => {
        await addOrders(redis, app.key('batched'), 3, n);
        n += 3;
        return spans.getFinishedSpans().some((s) => s.name === `process ${app.key('batched')}`);
      },
      // The re-check runs every second: well within this bound, however loaded the machine.
      { intervalMs: 100, timeoutMs: 10_000, message: 'a process span after the SDK was registered' },
    );
    await waitFor(() => app.settled.length === n, { message: 'all settled' });
    // Once seen, every entry of every later call is traced: drain a last batch and count its spans.
    spans.reset();
    const ids = await addOrders(redis, app.key('batched'), 7, n);
    await waitFor(() => app.settled.length === n + 7, { message: 'last seven' });
    const traced = new Set(spans.getFinishedSpans().map((s) => s.attributes['messaging.message.id']));
    expect(ids.filter((id) => !traced.has(id))).toEqual([]);
  });
});
