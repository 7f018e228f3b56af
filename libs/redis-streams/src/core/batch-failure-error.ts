import { brand } from '../brand.js';
import type { EntryFailure } from '../batch-failure-mark.js';
import { counted } from '../readable.js';
import type { StreamContext } from './stream-context.js';

/** One entry of a batch handler's call: its payload and its own context. */
export interface BatchEntry<T = unknown> {
  payload: T;
  context: StreamContext;
}

/**
 * Throw it from a batch handler to say which entries failed: only those stay pending (or are
 * dead-lettered: a `DeadLetterError` as their error, or their last allowed delivery); the rest
 * of the batch is acked. Any other throw fails the whole batch. The core's `BatchFailure`, with
 * the same rules: entries are named by their contexts, new on every delivery, so one that names
 * no entry of the call (made for an earlier call and thrown again) fails the whole batch.
 */
export class BatchFailureError extends Error {
  override readonly name = 'BatchFailureError';
  /** Read by the transport on an error of any copy of the package. */
  readonly batchFailures: readonly EntryFailure[];

  constructor(failures: Iterable<{ entry: BatchEntry; error?: unknown }>, message?: string) {
    const list: EntryFailure[] = [];
    for (const { entry, error } of failures)
      list.push({ context: entry.context, error: error ?? new Error(message ?? 'failed in its batch') });
    super(message ?? `${counted(list.length, 'entry', 'entries')} of the batch failed`);
    this.batchFailures = list;
  }

  /** Every entry in `entries` failed with `error`. */
  static of(entries: Iterable<BatchEntry>, error?: unknown): BatchFailureError {
    return new BatchFailureError(
      [...entries].map((entry) => ({ entry, error })),
      error instanceof Error ? error.message : undefined,
    );
  }
}
brand(BatchFailureError, 'BatchFailureError');
