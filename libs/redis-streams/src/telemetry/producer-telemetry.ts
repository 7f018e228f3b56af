import type { Tracer } from '@opentelemetry/api';
import { describeError } from '../describe-error.js';
import type { OtelApi } from './otel-api.js';
import { SdkPresence } from './sdk-presence.js';
import { ATTR, errorType, SCOPE, SYSTEM } from './semconv.js';

/**
 * The producer side of the OpenTelemetry messaging conventions: a PRODUCER span `send <stream>`
 * per `emit`/`send`, whose context travels in the entry's headers (W3C `traceparent` and
 * `tracestate`, through the app's global propagator) to the consumer's `process` span.
 */
export class ProducerTelemetry {
  private readonly tracer: Tracer;
  private readonly presence: SdkPresence;

  constructor(private readonly api: OtelApi) {
    this.tracer = api.trace.getTracer(SCOPE);
    this.presence = new SdkPresence(api);
  }

  /**
   * Runs `write` (the XADD) inside a span, giving it the headers that carry the span's context;
   * `write` resolves with the entry id.
   */
  async send(stream: string, conversationId: string | undefined, write: (traceHeaders: Record<string, string>) => Promise<string>): Promise<string> {
    const { api } = this;
    // No SDK: no span, and no headers either (a no-op propagator writes none).
    if (!this.presence.tracing) return write({});
    const active = api.context.active();
    const span = this.tracer.startSpan(`send ${stream}`, { kind: api.SpanKind.PRODUCER }, active);
    const recording = span.isRecording();
    if (recording) {
      span.setAttributes({ [ATTR.system]: SYSTEM, [ATTR.operationName]: 'send', [ATTR.operationType]: 'send', [ATTR.destination]: stream });
      if (conversationId !== undefined) span.setAttribute(ATTR.conversationId, conversationId);
    }
    const traceHeaders: Record<string, string> = {};
    api.propagation.inject(api.trace.setSpan(active, span), traceHeaders);
    try {
      const id = await write(traceHeaders);
      if (recording) span.setAttribute(ATTR.messageId, id);
      return id;
    } catch (error) {
      if (recording) {
        if (error instanceof Error) span.recordException(error);
        span.setAttribute(ATTR.errorType, errorType(error));
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(error) });
      }
      throw error;
    } finally {
      span.end();
    }
  }
}
