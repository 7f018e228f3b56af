import type { Counter, Histogram, MeterProvider, SpanOptions, Tracer } from '@opentelemetry/api';
import type { SettledEvent } from '../consumer/settle/settled-event.js';
import type { OtelApi } from './otel-api.js';

/** What one entry's or one call's trace reads from, and reports to, the consumer's telemetry (ConsumerTelemetry is it). */
export interface TraceScope {
  readonly api: OtelApi;
  readonly tracer: Tracer;
  readonly group: string;
  readonly consumer: string;
  /** The options of every entry's span (a CONSUMER span). */
  readonly consumerSpan: SpanOptions;
  /** `process <stream>`, the name of its entries' spans. */
  spanName(stream: string): string;
  /** `error.type` of a failure, of bounded cardinality. */
  errorType(error: unknown): string;
  /** The entry is decided (its span ended): its duration waits for the outcome to be final. */
  decided(event: SettledEvent, seconds: number): void;
}

/** The instruments of one meter provider (the app's SDK), and its gauges' unregistering. */
export interface Instruments {
  provider: MeterProvider;
  duration: Histogram;
  consumed: Counter;
  retryDelay: Histogram;
  unobserve: () => void;
}
