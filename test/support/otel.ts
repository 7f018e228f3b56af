import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

/** A metric reader that collects on demand (`reader.collect()`), as a Prometheus scrape would. */
export class PullReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Unregisters every OpenTelemetry global a test file set, so no other file inherits them. */
export function disableOtelGlobals(): void {
  trace.disable();
  metrics.disable();
  propagation.disable();
  context.disable();
}

/**
 * What an app's SDK registers, for one test file: a context manager and a tracer provider whose spans
 * the returned exporter keeps (emptied before each test); with `reader`, a meter provider it reads.
 * All of them unregistered after the file (disableOtelGlobals).
 */
export function useTracing({ reader }: { reader?: MetricReader } = {}): InMemorySpanExporter {
  const spans = new InMemorySpanExporter();
  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }));
    if (reader) metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  });
  afterAll(() => disableOtelGlobals());
  beforeEach(() => spans.reset());
  return spans;
}
