import type { Attributes, Context, Counter, Histogram, Meter, MeterProvider, Span, Tracer } from '@opentelemetry/api';
import type { DeliverySource, SettledEvent } from '../consumer/settled-event.js';
import { handlerMessage, handlerStack, printableClassOf } from '../describe-error.js';
import type { GroupStats } from '../health/group-stats.js';
import { headersOf } from '../codec/entry-codec.js';
import type { StreamEntry } from '../redis/stream-entry.js';
import { observeGroupGauges } from './group-gauges.js';
import { observeHandlerGauges, type HandlersSource } from './handler-gauges.js';
import type { OtelApi } from './otel-api.js';
import { safely } from './safely.js';
import { SdkPresence } from './sdk-presence.js';
import {
  ATTR,
  DURATION_BUCKETS,
  errorType,
  MAX_ERROR_TYPES,
  METRIC,
  OTHER_ERROR_TYPE,
  RETRY_DELAY_BUCKETS,
  SCOPE,
  SYSTEM,
} from './semconv.js';

/** One entry's `process` span and measurements, from the start of its settling to the decision. */
export interface ProcessTrace {
  /** Opens the span, parented to the producer's context found in the entry's headers (none: a root span). */
  open(headers: Record<string, string> | undefined, conversationId?: string, partition?: number): void;
  /** Runs the handler with the span as the active context, so its own spans are children of it. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** Ends the span with the outcome (and the error, if any) and records the metrics. */
  end(event: SettledEvent): void;
  /** Redis failed while settling: the entry stays pending; recorded as `failed`. */
  fail(error: unknown): void;
}

/** The instruments of one meter provider (the app's SDK), and its gauges' unregistering. */
interface Instruments {
  provider: MeterProvider;
  duration: Histogram;
  consumed: Counter;
  retryDelay: Histogram;
  unobserve: () => void;
}

/**
 * The consumer side of the OpenTelemetry messaging conventions: a CONSUMER span `process <stream>`
 * per entry, `messaging.process.duration`, `messaging.client.consumed.messages` and the lag and
 * pending gauges. Nothing per entry while the app has no SDK registered.
 */
export class ConsumerTelemetry {
  readonly tracer: Tracer;
  private readonly presence: SdkPresence;
  private instruments: Instruments | undefined;
  /** Metric attributes per stream, outcome and error type: built once, not per entry. */
  private readonly metricAttrs = new Map<string, Attributes>();
  /** The `error.type` values reported so far: at most MAX_ERROR_TYPES, later ones are `_OTHER`. */
  private readonly errorTypes = new Set<string>();

  constructor(
    readonly api: OtelApi,
    readonly group: string,
    readonly consumer: string,
    private readonly stats: GroupStats,
    /** The loops' running handlers, and the streams they read, for the stuck-entry gauges. */
    private readonly handlers?: { source: HandlersSource; streams: readonly string[] },
  ) {
    this.tracer = api.trace.getTracer(SCOPE);
    this.presence = new SdkPresence(api);
    // The gauges report from the start, not from the first entry.
    safely(api, 'meter provider', () => this.meters(), undefined);
  }

  /** Each entry's trace, with one look for an SDK per batch; undefined when there is none to report to. */
  startAll(entries: readonly StreamEntry[], source: DeliverySource): (ProcessTrace | undefined)[] | undefined {
    if (!this.presence.tracing && !this.presence.lastMeterProvider) return undefined;
    return entries.map((entry) => this.start(entry, source));
  }

  /** The entry's trace; undefined when there is no SDK to report to. */
  start(entry: StreamEntry, source: DeliverySource): ProcessTrace | undefined {
    const tracing = this.presence.tracing;
    // The hot path without an SDK: two cached flags (no clock read), no closure, no allocation.
    const provider = this.presence.lastMeterProvider;
    const instruments =
      provider === this.instruments?.provider ? this.instruments : safely(this.api, 'meter provider', () => this.meters(), undefined);
    if (!tracing && !instruments) return undefined;
    return new EntryTrace(this, entry, source, tracing, instruments);
  }

  /** How long each decided entry took, until its outcome is final (see `settled`). */
  private readonly durations = new WeakMap<SettledEvent, number>();

  /** The entry is decided (its span ended): its duration waits for the outcome to be final. */
  decided(event: SettledEvent, seconds: number): void {
    this.durations.set(event, seconds);
  }

  /**
   * The outcome is final (an ack confirmed, a failure or dead letter reported): recorded now, so
   * an entry whose ack was lost, or that `close()` abandoned, is not counted as acked (it runs
   * again and is counted then).
   */
  settled(event: SettledEvent): void {
    const seconds = this.durations.get(event);
    if (seconds === undefined) return;
    this.durations.delete(event);
    safely(
      this.api,
      'metric record',
      () => {
        const instruments = this.meters();
        if (!instruments) return;
        const error = event.outcome === 'acked' ? undefined : this.errorType(event.error);
        const attrs = this.attributes(event.stream, event.outcome, error);
        instruments.duration.record(seconds, attrs);
        instruments.consumed.add(1, attrs);
        if (event.retryInMs !== undefined) instruments.retryDelay.record(event.retryInMs / 1000, attrs);
      },
      undefined,
    );
  }

  /** `error.type` of a failure, of bounded cardinality (what handlers throw is the user's). */
  errorType(error: unknown): string {
    const type = errorType(error);
    if (this.errorTypes.has(type)) return type;
    if (this.errorTypes.size >= MAX_ERROR_TYPES) return OTHER_ERROR_TYPE;
    this.errorTypes.add(type);
    return type;
  }

  dispose(): void {
    this.instruments?.unobserve();
    this.instruments = undefined;
  }

  /** The instruments on the app's current meter provider, made (again) when it changed. */
  private meters(): Instruments | undefined {
    const provider = this.presence.meterProvider;
    if (provider === this.instruments?.provider) return this.instruments;
    this.dispose();
    if (!provider) return undefined;
    const meter = provider.getMeter(SCOPE);
    this.instruments = {
      provider,
      duration: meter.createHistogram(METRIC.processDuration, {
        unit: 's',
        description: 'Time to settle an entry: decode, handler, dead-lettering',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      consumed: meter.createCounter(METRIC.consumed, {
        unit: '{message}',
        description: 'Entries settled, by outcome (acked, failed, dead-lettered)',
      }),
      retryDelay: meter.createHistogram(METRIC.retryDelay, {
        unit: 's',
        description: 'Delay before the next try of a failed entry (its retry policy, or the idle-time default)',
        advice: { explicitBucketBoundaries: RETRY_DELAY_BUCKETS },
      }),
      unobserve: this.observeGauges(meter),
    };
    return this.instruments;
  }

  private observeGauges(meter: Meter): () => void {
    const groups = observeGroupGauges(meter, this.stats, this.group);
    const h = this.handlers;
    const handlers = h ? observeHandlerGauges(meter, h.source, h.streams, this.group) : () => {};
    return () => {
      groups();
      handlers();
    };
  }

  private attributes(stream: string, outcome: string, error: string | undefined): Attributes {
    const key = `${stream}\u0000${outcome}\u0000${error ?? ''}`;
    let attrs = this.metricAttrs.get(key);
    if (!attrs) {
      attrs = {
        [ATTR.system]: SYSTEM,
        [ATTR.operationName]: 'process',
        [ATTR.destination]: stream,
        [ATTR.group]: this.group,
        [ATTR.outcome]: outcome,
        ...(error === undefined ? {} : { [ATTR.errorType]: error }),
      };
      this.metricAttrs.set(key, attrs);
    }
    return attrs;
  }
}

class EntryTrace implements ProcessTrace {
  private readonly startedAt = performance.now();
  private span: Span | undefined;
  private parent: Context;

  constructor(
    private readonly t: ConsumerTelemetry,
    private readonly entry: StreamEntry,
    private readonly source: DeliverySource,
    private readonly tracing: boolean,
    private readonly instruments: Instruments | undefined,
  ) {
    this.parent = t.api.ROOT_CONTEXT;
  }

  open(headers: Record<string, string> | undefined, conversationId?: string, partition?: number): void {
    if (!this.tracing) return;
    safely(this.t.api, 'span start', () => this.openSpan(headers, conversationId, partition), undefined);
  }

  private openSpan(headers: Record<string, string> | undefined, conversationId?: string, partition?: number): void {
    const { api, tracer } = this.t;
    const { entry } = this;
    // The producer's context is the parent; an entry without one (another producer) starts a trace.
    if (headers) this.parent = api.propagation.extract(api.ROOT_CONTEXT, headers);
    const span = (this.span = tracer.startSpan(`process ${entry.stream}`, { kind: api.SpanKind.CONSUMER }, this.parent));
    if (!span.isRecording()) return;
    span.setAttributes({
      [ATTR.system]: SYSTEM,
      [ATTR.operationName]: 'process',
      [ATTR.operationType]: 'process',
      [ATTR.destination]: entry.stream,
      [ATTR.group]: this.t.group,
      [ATTR.clientId]: this.t.consumer,
      [ATTR.messageId]: entry.id,
      [ATTR.deliveryCount]: entry.deliveryCount,
      [ATTR.deliverySource]: this.source,
    });
    if (partition !== undefined) span.setAttribute(ATTR.partition, String(partition));
    if (conversationId !== undefined) span.setAttribute(ATTR.conversationId, conversationId);
  }

  run<T>(work: () => Promise<T>): Promise<T> {
    const { api } = this.t;
    const span = this.span;
    if (!span) return work();
    // The handler runs exactly once: inside the span's context, or without it if the context manager fails.
    let ran = false;
    try {
      return api.context.with(api.trace.setSpan(this.parent, span), () => {
        ran = true;
        return work();
      });
    } catch (err) {
      if (ran) throw err;
      safely(
        api,
        'context manager',
        () => {
          throw err;
        },
        undefined,
      );
      return work();
    }
  }

  end(event: SettledEvent): void {
    safely(this.t.api, 'span end', () => this.endSpan(event), undefined);
  }

  private endSpan(event: SettledEvent): void {
    const error = event.outcome === 'acked' ? undefined : event.error;
    const type = event.outcome === 'acked' ? undefined : this.t.errorType(error);
    // Refused before decoding (too many deliveries, too large, malformed): still the producer's child when its headers say so.
    if (this.tracing && !this.span) this.open(headersOf(this.entry, MAX_HEADERS_CHARS));
    const span = this.span;
    if (span?.isRecording()) {
      span.setAttribute(ATTR.outcome, event.outcome);
      if (event.deadLetterId !== undefined) span.setAttribute(ATTR.deadLetterId, event.deadLetterId);
      if (event.retryInMs !== undefined) span.setAttribute(ATTR.retryIn, event.retryInMs);
      if (type !== undefined) {
        // A copy, masked and escaped: the handler's message may quote a password or the entry, and exporters send it as it is.
        const message = handlerMessage(error);
        const name = typeof error === 'object' && error !== null ? printableClassOf(error) : typeof error;
        span.recordException({ name, message, stack: handlerStack(error) });
        span.setAttribute(ATTR.errorType, type);
        span.setStatus({ code: this.t.api.SpanStatusCode.ERROR, message: error === undefined ? event.outcome : message });
      }
    }
    span?.end();
    if (this.instruments) this.t.decided(event, (performance.now() - this.startedAt) / 1000);
  }

  fail(error: unknown): void {
    const { entry } = this;
    this.end({ stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source: this.source, outcome: 'failed', error });
  }
}

/** Headers longer than this are not read for a refused entry's span (a W3C context takes ~600 characters at most): refusing a too-large entry spares parsing it. */
const MAX_HEADERS_CHARS = 8192;
