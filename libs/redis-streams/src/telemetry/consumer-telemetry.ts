import { checkedDelay } from '../options/retry-options.js';
import { rateLimitedDelay } from '../rate-limited-mark.js';
import { retryLaterDelay } from '../retry-later-mark.js';
import type { Attributes, Meter, SpanOptions, Tracer } from '@opentelemetry/api';
import type { ProcessTrace, SettleObserver } from '../consumer/settle/settle-observer.js';
import type { DeliverySource, SettledEvent } from '../consumer/settle/settled-event.js';
import type { GroupStats } from '../health/group-stats.js';
import type { StreamEntry } from '../stream-entry.js';
import { EntryTrace } from './entry-trace.js';
import { BatchTrace } from './batch-trace.js';
import { observeGroupGauges } from './group-gauges.js';
import { observeHandlerGauges, type DurabilitySource, type HandlersSource } from './handler-gauges.js';
import type { OtelApi } from './otel-api.js';
import type { Instruments, TraceScope } from './trace-scope.js';
import { safely, stepFailed } from './safely.js';
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

/** Decided entries whose outcome is not final yet, at most (see ConsumerTelemetry.decided). */
const MAX_UNSETTLED_DURATIONS = 100_000;

/**
 * The consumer side of the OpenTelemetry messaging conventions: a CONSUMER span `process <stream>`
 * per entry, `messaging.process.duration`, `messaging.client.consumed.messages` and the lag and
 * pending gauges. Nothing per entry while the app has no SDK registered.
 */
export class ConsumerTelemetry implements SettleObserver, TraceScope {
  readonly tracer: Tracer;
  private readonly presence: SdkPresence;
  private instruments: Instruments | undefined;
  /** Metric attributes per stream, outcome and error type: built once, not per entry. */
  private readonly metricAttrs = new Map<string, Attributes>();
  /** Those of an acked entry, by stream. */
  private readonly ackedAttrs = new Map<string, Attributes>();
  /** Span names by stream (`process <stream>`), and the options of every entry's span: made once, not per entry. */
  private readonly spanNames = new Map<string, string>();
  readonly consumerSpan: SpanOptions;

  /** The `error.type` values reported so far: at most MAX_ERROR_TYPES, later ones are `_OTHER`. */
  private readonly errorTypes = new Set<string>();

  constructor(
    readonly api: OtelApi,
    readonly group: string,
    readonly consumer: string,
    private readonly stats: GroupStats,
    /** The loops' running handlers, and the streams they read, for the stuck-entry gauges. */
    private readonly handlers?: { source: HandlersSource; streams: readonly string[]; durability?: DurabilitySource },
  ) {
    this.tracer = api.trace.getTracer(SCOPE);
    this.consumerSpan = { kind: api.SpanKind.CONSUMER };
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

  /** `process <stream>`, the name of its entries' spans. */
  spanName(stream: string): string {
    let name = this.spanNames.get(stream);
    if (name === undefined) this.spanNames.set(stream, (name = `process ${stream}`));
    return name;
  }

  /**
   * A batch handler's call: one `process` span linking each entry's producer context (the
   * conventions' batch shape); undefined when spans are not recorded (no SDK, or not sampled).
   */
  startBatch(stream: string, traces: readonly (ProcessTrace | undefined)[]): BatchTrace | undefined {
    if (!this.presence.tracing) return undefined;
    return safely(this.api, 'span start', () => BatchTrace.start(this, stream, traces), undefined);
  }

  /**
   * How long each decided entry took, until its outcome is final (see `settled`). A Map, not a
   * WeakMap: half the cost per entry. An event never settled (its ack lost: the entry runs again
   * under a new one) is not kept past MAX_UNSETTLED_DURATIONS, the oldest going first.
   */
  private readonly durations = new Map<SettledEvent, number>();

  /** The entry is decided (its span ended): its duration waits for the outcome to be final. */
  decided(event: SettledEvent, seconds: number): void {
    if (this.durations.size >= MAX_UNSETTLED_DURATIONS) this.durations.delete(this.durations.keys().next().value!);
    this.durations.set(event, seconds);
  }

  /**
   * The outcome is final (an ack confirmed, a failure or dead letter reported): recorded now, so
   * an entry whose ack was lost, or that `close()` abandoned, is not counted as acked (it runs
   * again and is counted then).
   */
  settled(event: SettledEvent): void {
    if (this.durations.size === 0) return;
    const seconds = this.durations.get(event);
    if (seconds === undefined) return;
    this.durations.delete(event);
    // Per entry: a try here, not safely()'s closure.
    try {
      const instruments = this.meters();
      if (!instruments) return;
      const error = event.outcome === 'acked' ? undefined : this.errorType(event.error);
      const attrs = this.attributes(event.stream, metricOutcome(event), error);
      instruments.duration.record(seconds, attrs);
      this.count(instruments, attrs);
      if (event.retryInMs !== undefined) instruments.retryDelay.record(event.retryInMs / 1000, attrs);
    } catch (err) {
      stepFailed(this.api, 'metric record', err);
    }
  }

  /** Consumed counts by attribute set, added once per batch (the SDK hashes the attributes on every add). */
  private readonly counts = new Map<Attributes, number>();

  private count(instruments: Instruments, attrs: Attributes): void {
    if (this.counts.size === 0) queueMicrotask(() => this.flushCounts(instruments));
    this.counts.set(attrs, (this.counts.get(attrs) ?? 0) + 1);
  }

  private flushCounts(instruments: Instruments): void {
    safely(this.api, 'metric record', () => this.counts.forEach((n, attrs) => instruments.consumed.add(n, attrs)), undefined);
    this.counts.clear();
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
        description: 'Entries settled, by outcome (acked, failed, dead-lettered, rate-limited, retry-requested)',
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
    const handlers = h ? observeHandlerGauges(meter, h.source, h.streams, this.group, h.durability) : () => {};
    return () => {
      groups();
      handlers();
    };
  }

  private attributes(stream: string, outcome: string, error: string | undefined): Attributes {
    // The common case, an acked entry: looked up by its stream, no key built per entry.
    const acked = outcome === 'acked' && error === undefined;
    const key = acked ? stream : `${stream}\u0000${outcome}\u0000${error ?? ''}`;
    const cache = acked ? this.ackedAttrs : this.metricAttrs;
    let attrs = cache.get(key);
    if (!attrs) {
      attrs = {
        [ATTR.system]: SYSTEM,
        [ATTR.operationName]: 'process',
        [ATTR.destination]: stream,
        [ATTR.group]: this.group,
        [ATTR.outcome]: outcome,
        ...(error === undefined ? {} : { [ATTR.errorType]: error }),
      };
      cache.set(key, attrs);
    }
    return attrs;
  }
}

/**
 * The metrics' outcome of a settled entry: a failure the handler threw is `failed`; an entry that waits for a rate
 * limit (its key's limit, a RateLimitedException) is `rate-limited`, one whose handler asked for a later try
 * (RetryLaterException) `retry-requested`: neither is a failure, and the failure-rate alert counts neither. One whose
 * delay is unusable (-1, NaN) is what the engine makes of it: a failure, counted.
 */
function metricOutcome(event: SettledEvent): string {
  if (event.outcome !== 'failed') return event.outcome;
  if (typeof checkedDelay(rateLimitedDelay(event.error)) === 'number') return 'rate-limited';
  if (typeof checkedDelay(retryLaterDelay(event.error)) === 'number') return 'retry-requested';
  return 'failed';
}
