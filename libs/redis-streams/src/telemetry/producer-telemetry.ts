import type { Counter, Histogram, MeterProvider, Span, Tracer } from '@opentelemetry/api';
import { describeError } from '../describe-error.js';
import type { OtelApi } from './otel-api.js';
import { safely } from './safely.js';
import { SdkPresence } from './sdk-presence.js';
import { ATTR, DURATION_BUCKETS, errorType, METRIC, SCOPE, SYSTEM } from './semconv.js';

/** The producer's instruments on one meter provider (the app's SDK). */
interface ProducerInstruments {
  provider: MeterProvider;
  sent: Counter;
  duration: Histogram;
}

/**
 * The producer side of the OpenTelemetry messaging conventions: a PRODUCER span `send <stream>`
 * per `emit`/`send`, whose context travels in the entry's headers (W3C `traceparent` and
 * `tracestate`, through the app's global propagator) to the consumer's `process` span; and, with a
 * meter provider, `messaging.redis_streams.sent.messages` (by outcome: sent, failed) and
 * `messaging.redis_streams.send.duration_seconds`.
 */
export class ProducerTelemetry {
  private readonly tracer: Tracer;
  private readonly presence: SdkPresence;
  private instruments: ProducerInstruments | undefined;

  constructor(private readonly api: OtelApi) {
    this.tracer = api.trace.getTracer(SCOPE);
    this.presence = new SdkPresence(api);
  }

  /**
   * Runs `write` (the XADD) inside a span, giving it the headers that carry the span's context;
   * `write` resolves with the entry id. A record that carries a `traceparent` of its own (a
   * context relayed by hand) gets its span as a child of that context. Whatever the SDK throws,
   * `write` runs exactly once.
   */
  async send(
    stream: string,
    conversationId: string | undefined,
    recordHeaders: Record<string, string>,
    write: (traceHeaders: Record<string, string>) => Promise<string>,
  ): Promise<string> {
    const meters = safely(this.api, 'metrics', () => this.meters(), undefined);
    if (!meters) return this.traced(stream, conversationId, recordHeaders, write);
    const startedAt = performance.now();
    try {
      const id = await this.traced(stream, conversationId, recordHeaders, write);
      this.measure(meters, stream, startedAt);
      return id;
    } catch (error) {
      this.measure(meters, stream, startedAt, error);
      throw error;
    }
  }

  /** One send's outcome and duration; `error` when it failed. */
  private measure(meters: ProducerInstruments, stream: string, startedAt: number, error?: unknown): void {
    safely(
      this.api,
      'metrics',
      () => {
        const attributes = {
          [ATTR.system]: SYSTEM,
          [ATTR.operationName]: 'send',
          [ATTR.destination]: stream,
          [ATTR.outcome]: error === undefined ? 'sent' : 'failed',
          ...(error === undefined ? {} : { [ATTR.errorType]: errorType(error) }),
        };
        meters.sent.add(1, attributes);
        meters.duration.record((performance.now() - startedAt) / 1000, attributes);
      },
      undefined,
    );
  }

  /** The instruments on the app's current meter provider, made (again) when it changed; undefined without one. */
  private meters(): ProducerInstruments | undefined {
    const provider = this.presence.meterProvider;
    if (provider === this.instruments?.provider) return this.instruments;
    this.instruments = undefined;
    if (!provider) return undefined;
    const meter = provider.getMeter(SCOPE);
    return (this.instruments = {
      provider,
      sent: meter.createCounter(METRIC.sent, { unit: '{message}', description: 'Entries written by emit/send, by outcome (sent, failed)' }),
      duration: meter.createHistogram(METRIC.sendDuration, {
        unit: 's',
        description: 'Time to write an entry: encode, wait for the connection, XADD',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
    });
  }

  /** `write` inside a `send` span when tracing is on. */
  private async traced(
    stream: string,
    conversationId: string | undefined,
    recordHeaders: Record<string, string>,
    write: (traceHeaders: Record<string, string>) => Promise<string>,
  ): Promise<string> {
    const { api } = this;
    // No SDK: no span, and no headers either (a no-op propagator writes none).
    if (!this.presence.tracing) return write({});
    const started = safely(api, 'span start', () => this.start(stream, conversationId, recordHeaders), undefined);
    if (!started) return write({});
    const { span, traceHeaders } = started;
    try {
      const id = await write(traceHeaders);
      safely(api, 'span end', () => span.isRecording() && span.setAttribute(ATTR.messageId, id), undefined);
      return id;
    } catch (error) {
      safely(
        api,
        'span end',
        () => {
          if (!span.isRecording()) return;
          if (error instanceof Error) span.recordException(error);
          span.setAttribute(ATTR.errorType, errorType(error));
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(error) });
        },
        undefined,
      );
      throw error;
    } finally {
      safely(api, 'span end', () => span.end(), undefined);
    }
  }

  private start(
    stream: string,
    conversationId: string | undefined,
    recordHeaders: Record<string, string>,
  ): { span: Span; traceHeaders: Record<string, string> } {
    const { api } = this;
    const active = api.context.active();
    const parent = recordHeaders.traceparent === undefined ? active : api.propagation.extract(active, recordHeaders);
    const span = this.tracer.startSpan(`send ${stream}`, { kind: api.SpanKind.PRODUCER }, parent);
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.system]: SYSTEM, [ATTR.operationName]: 'send', [ATTR.operationType]: 'send', [ATTR.destination]: stream });
      if (conversationId !== undefined) span.setAttribute(ATTR.conversationId, conversationId);
    }
    const traceHeaders: Record<string, string> = {};
    api.propagation.inject(api.trace.setSpan(parent, span), traceHeaders);
    return { span, traceHeaders };
  }
}
