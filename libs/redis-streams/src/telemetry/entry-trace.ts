// Imported, not the global: `performance` on globalThis is a getter Node runs on every use (here, per entry).
import { performance } from 'node:perf_hooks';
import type { Context, Span, SpanContext } from '@opentelemetry/api';
import { headersOf } from '../codec/entry-codec.js';
import type { DeliverySource, SettledEvent } from '../consumer/settle/settled-event.js';
import { handlerMessage, handlerStack, printableClassOf } from '../describe-error.js';
import type { StreamEntry } from '../stream-entry.js';
import type { ProcessTrace } from '../consumer/settle/settle-observer.js';
import type { Instruments, TraceScope } from './trace-scope.js';
import { stepFailed } from './safely.js';
import { runInContext } from './run-in-context.js';
import { ATTR, SYSTEM } from './semconv.js';

/** One entry's `process` span and measurements (see ProcessTrace). */
export class EntryTrace implements ProcessTrace {
  private readonly startedAt = performance.now();
  private span: Span | undefined;
  private parent: Context;
  private opened = false;

  constructor(
    private readonly t: TraceScope,
    private readonly entry: StreamEntry,
    private readonly source: DeliverySource,
    private readonly tracing: boolean,
    private readonly instruments: Instruments | undefined,
  ) {
    this.parent = t.api.ROOT_CONTEXT;
  }

  open(headers: Record<string, string> | undefined, conversationId?: string, partition?: number): void {
    if (!this.tracing) return;
    // Per entry: a try here, not safely()'s closure.
    try {
      this.openSpan(headers, conversationId, partition);
    } catch (err) {
      stepFailed(this.t.api, 'span start', err);
    }
  }

  private openSpan(headers: Record<string, string> | undefined, conversationId?: string, partition?: number): void {
    const { api, tracer } = this.t;
    const { entry } = this;
    this.opened = true;
    // The producer's context is the parent; an entry without one (another producer) starts a trace.
    if (headers) this.parent = api.propagation.extract(api.ROOT_CONTEXT, headers);
    const span = (this.span = tracer.startSpan(this.t.spanName(entry.stream), this.t.consumerSpan, this.parent));
    if (!span.isRecording()) return;
    // One by one: no attributes object to build and walk per entry.
    span.setAttribute(ATTR.system, SYSTEM);
    span.setAttribute(ATTR.operationName, 'process');
    span.setAttribute(ATTR.operationType, 'process');
    span.setAttribute(ATTR.destination, entry.stream);
    span.setAttribute(ATTR.group, this.t.group);
    span.setAttribute(ATTR.clientId, this.t.consumer);
    span.setAttribute(ATTR.messageId, entry.id);
    span.setAttribute(ATTR.deliveryCount, entry.deliveryCount);
    span.setAttribute(ATTR.deliverySource, this.source);
    if (partition !== undefined) span.setAttribute(ATTR.partition, String(partition));
    if (conversationId !== undefined) span.setAttribute(ATTR.conversationId, conversationId);
  }

  run<T>(work: () => Promise<T>): Promise<T> {
    const { api } = this.t;
    const span = this.span;
    if (!span) return work();
    return runInContext(api, api.trace.setSpan(this.parent, span), work);
  }

  end(event: SettledEvent): void {
    try {
      this.endSpan(event);
    } catch (err) {
      stepFailed(this.t.api, 'span end', err);
    }
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

  /** The producer's span context from the entry's headers (a batch call's span links it); undefined without one. */
  producer(): SpanContext | undefined {
    if (!this.opened) return undefined;
    const context = this.t.api.trace.getSpanContext(this.parent);
    return context && this.t.api.trace.isSpanContextValid(context) ? context : undefined;
  }

  fail(error: unknown): void {
    const { entry } = this;
    this.end({ stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source: this.source, outcome: 'failed', error });
  }
}

/** Headers longer than this are not read for a refused entry's span (a W3C context takes ~600 characters at most): refusing a too-large entry spares parsing it. */
const MAX_HEADERS_CHARS = 8192;
