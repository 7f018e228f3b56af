import { BaseRpcContext, RpcException } from '@nestjs/microservices';
import { brand } from './brand.js';
import type { RedisStreamsContext } from './context.js';
import type { RedisStreamsBatchContextArgs } from './consumer/settle/entry-context.js';
import type { EntryFailure } from './batch-failure-mark.js';
import { counted } from './readable.js';

export type { RedisStreamsBatchContextArgs };

/** One entry of a batch: what a single-entry handler gets as `@Payload()` and `@Ctx()`. */
export interface StreamBatchEntry<T = unknown> {
  payload: T;
  context: RedisStreamsContext;
}

/** What `@Ctx()` gives a batch handler (each entry has its own context too). */
export class RedisStreamsBatchContext extends BaseRpcContext<[RedisStreamsBatchContextArgs]> {
  constructor(args: RedisStreamsBatchContextArgs) {
    super([args]);
  }

  getPattern(): string {
    return this.args[0].pattern;
  }

  getGroup(): string {
    return this.args[0].group;
  }

  getConsumer(): string {
    return this.args[0].consumer;
  }

  getSize(): number {
    return this.args[0].size;
  }
}
brand(RedisStreamsBatchContext, 'RedisStreamsBatchContext');

/**
 * Throw it from a batch handler to say which entries failed: only those stay pending (or are
 * dead-lettered: a `DeadLetterException` as their error, or their last allowed delivery); the
 * rest of the batch is acked. Any other throw fails the whole batch. Only a thrown one counts
 * (a retry that then succeeds, or one made and not thrown, fails nothing); returned, it counts
 * only as long as no interceptor rewrites the result. An `RpcException`, so Nest's exception
 * layer hands the list through to the transport. Entries are named by their contexts, which
 * are new on every delivery: one that names no entry of the call (made for an earlier call and
 * thrown again, or rewritten by an exception filter) fails the whole batch, never acks it.
 */
export class BatchFailure extends RpcException {
  constructor(failures: Iterable<{ entry: StreamBatchEntry; error?: unknown }>, message?: string) {
    const list: EntryFailure[] = [];
    for (const { entry, error } of failures)
      list.push({ context: entry.context, error: error ?? new Error(message ?? 'failed in its batch') });
    super({ status: 'error', message: message ?? `${counted(list.length, 'entry', 'entries')} of the batch failed`, batchFailures: list });
  }

  /** Every entry in `entries` failed with `error`. */
  static of(entries: Iterable<StreamBatchEntry>, error?: unknown): BatchFailure {
    return new BatchFailure(
      [...entries].map((entry) => ({ entry, error })),
      error instanceof Error ? error.message : undefined,
    );
  }
}
brand(BatchFailure, 'BatchFailure');

export { batchFailures } from './batch-failure-mark.js';
