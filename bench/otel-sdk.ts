// The OpenTelemetry SDK as an app's NodeSDK registers it, for the telemetry section's children: spans and
// metrics recorded, exported nowhere (the cost of recording them, not an exporter's), its context manager in use.

/** 'parent': the SDK's default parent-based sampler (follows the producer's sampled flag); 'always': every span recorded. */
export type OtelSampler = 'parent' | 'always';

export async function registerOtelSdk(samplerKind: OtelSampler): Promise<void> {
  const { context, metrics, propagation, trace } = await import('@opentelemetry/api');
  const { W3CTraceContextPropagator } = await import('@opentelemetry/core');
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
  // What an app's NodeSDK registers besides the providers: the W3C propagator (without it no entry has a parent,
  // and a parent-based sampler samples every root) and a context manager (spans made in a handler find their parent).
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // In use from the start, as in an app whose other instrumentations (http, a database client) have run: from its
  // first context.with, Node runs the AsyncLocalStorage's hooks on every promise the process makes. The variants
  // that trace would start it at their first entry; the one with `telemetry: false` measures it alone.
  context.with(context.active(), () => undefined);
  const { AlwaysOnSampler, BatchSpanProcessor, TracerProvider } = await import('@opentelemetry/sdk-trace');
  const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics');
  const discard = {
    export: (_spans: unknown, done: (r: { code: number }) => void) => done({ code: 0 }),
    shutdown: () => Promise.resolve(),
  };
  const sampler = samplerKind === 'always' ? { sampler: new AlwaysOnSampler() } : {};
  trace.setGlobalTracerProvider(new TracerProvider({ ...sampler, spanProcessors: [new BatchSpanProcessor({ exporter: discard })] }));
  class Reader extends MetricReader {
    protected onForceFlush = () => Promise.resolve();
    protected onShutdown = () => Promise.resolve();
  }
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new Reader()] }));
}

/** A producer's W3C context for entry `i`, one in `sampledEvery` sampled (as a producer's ratio sampler leaves them). */
export function traceparentOf(i: number, sampledEvery: number): string {
  const hex = (n: number, length: number) => n.toString(16).padStart(length, '0');
  return `00-${hex(i + 1, 32)}-${hex(i + 1, 16)}-${i % sampledEvery === 0 ? '01' : '00'}`;
}
