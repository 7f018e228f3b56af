import type { Link, Span } from '@opentelemetry/api';
import { handlerMessage, handlerStack, printableClassOf } from '../describe-error.js';
import type { CallTrace, ProcessTrace } from '../consumer/settle/settle-observer.js';
import { EntryTrace } from './entry-trace.js';
import type { TraceScope } from './trace-scope.js';
import { safely } from './safely.js';
import { ATTR, SYSTEM } from './semconv.js';
import { runInContext } from './run-in-context.js';

/**
 * A batch handler's call: one CONSUMER span `process <stream>` with `messaging.batch.message_count`
 * and a link to each entry's producer context (the messaging conventions' batch shape, as the
 * kafkajs instrumentation does), no parent: the entries come from many traces. The handler runs
 * inside it, so its own spans are the call's children.
 */
export class BatchTrace implements CallTrace {
  private constructor(
    private readonly t: TraceScope,
    private readonly span: Span,
  ) {}

  static start(t: TraceScope, stream: string, traces: readonly (ProcessTrace | undefined)[]): BatchTrace | undefined {
    const { api, tracer } = t;
    const links: Link[] = [];
    for (const trace of traces) {
      // Every trace settling got is this telemetry's own EntryTrace (ConsumerTelemetry.start).
      const context = trace instanceof EntryTrace ? trace.producer() : undefined;
      if (context) links.push({ context });
    }
    const span = tracer.startSpan(`process ${stream}`, { kind: api.SpanKind.CONSUMER, links, root: true });
    if (!span.isRecording()) {
      span.end();
      return undefined;
    }
    span.setAttributes({
      [ATTR.system]: SYSTEM,
      [ATTR.operationName]: 'process',
      [ATTR.operationType]: 'process',
      [ATTR.destination]: stream,
      [ATTR.group]: t.group,
      [ATTR.clientId]: t.consumer,
      [ATTR.batchSize]: traces.length,
    });
    return new BatchTrace(t, span);
  }

  /** Runs the call with the span as the active context; if the context manager fails, without it (the call runs once). */
  run<T>(work: () => Promise<T>): Promise<T> {
    const { api } = this.t;
    return runInContext(api, api.trace.setSpan(api.ROOT_CONTEXT, this.span), work);
  }

  /** Ends the span: the call's error (all failed, or a BatchFailure naming some), if it threw. */
  end(error?: unknown, thrown = false): void {
    safely(
      this.t.api,
      'span end',
      () => {
        if (thrown) {
          const message = handlerMessage(error);
          const name = typeof error === 'object' && error !== null ? printableClassOf(error) : typeof error;
          this.span.recordException({ name, message, stack: handlerStack(error) });
          this.span.setAttribute(ATTR.errorType, this.t.errorType(error));
          this.span.setStatus({ code: this.t.api.SpanStatusCode.ERROR, message });
        }
        this.span.end();
      },
      undefined,
    );
  }
}
