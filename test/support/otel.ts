import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { MetricReader } from '@opentelemetry/sdk-metrics';

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
