import type { StreamEntry } from '../../stream-entry.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';

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

/** A batch handler's call: one trace for the call, beside its entries' own. */
export interface CallTrace {
  /** Runs the call with the call's span as the active context. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** Ends it: the call's error (all failed, or a BatchFailure naming some), if it threw. */
  end(error?: unknown, thrown?: boolean): void;
}

/**
 * What settling reports to, when anything is there to report to (OpenTelemetry: ConsumerTelemetry
 * implements it). The settle steps know only this; the observer is handed in by the engine.
 */
export interface SettleObserver {
  /** The entry's trace; undefined when there is nothing to report to. */
  start(entry: StreamEntry, source: DeliverySource): ProcessTrace | undefined;
  /** Each entry's trace, with one look for a reporter per batch; undefined when there is none. */
  startAll(entries: readonly StreamEntry[], source: DeliverySource): (ProcessTrace | undefined)[] | undefined;
  /** A batch handler's call, given its entries' traces; undefined when it is not recorded. */
  startBatch(stream: string, traces: readonly (ProcessTrace | undefined)[]): CallTrace | undefined;
}
