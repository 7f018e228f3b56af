import { BaseRpcContext, RpcException } from '@nestjs/microservices';
import { brand } from './brand.js';
import type { RedisStreamsContext } from './context.js';

/** One entry of a batch: what a single-entry handler gets as `@Payload()` and `@Ctx()`. */
export interface StreamBatchEntry<T = unknown> {
  payload: T;
  context: RedisStreamsContext;
}

export interface RedisStreamsBatchContextArgs {
  /** The handler pattern (a partitioned stream's logical name). */
  pattern: string;
  group: string;
  consumer: string;
  /** Entries in this call. */
  size: number;
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

/** One entry a batch handler failed on, as the transport reads it back. */
export interface BatchEntryFailure {
  stream: string;
  id: string;
  error: unknown;
}

/**
 * Throw (or return) it from a batch handler to say which entries failed: only those stay
 * pending (or are dead-lettered: a `DeadLetterException` as their error, or their last allowed
 * delivery); the rest of the batch is acked. Any other throw fails the whole batch.
 * An `RpcException`, so Nest's exception layer hands the list through to the transport.
 */
export class BatchFailure extends RpcException {
  constructor(failures: Iterable<{ entry: StreamBatchEntry; error?: unknown }>, message?: string) {
    const list: BatchEntryFailure[] = [];
    for (const { entry, error } of failures) {
      list.push({ stream: entry.context.getStream(), id: entry.context.getId(), error: error ?? new Error(message ?? 'failed in its batch') });
    }
    super({ status: 'error', message: message ?? `${list.length} entries of the batch failed`, batchFailures: list });
  }

  /** Every entry in `entries` failed with `error`. */
  static of(entries: Iterable<StreamBatchEntry>, error?: unknown): BatchFailure {
    return new BatchFailure([...entries].map((entry) => ({ entry, error })), error instanceof Error ? error.message : undefined);
  }
}
brand(BatchFailure, 'BatchFailure');

/** The failed entries a batch handler reported, from a {@link BatchFailure} as it comes out of Nest's RPC exception filter; undefined for any other error. */
export function batchFailures(err: unknown): BatchEntryFailure[] | undefined {
  const error = err instanceof BatchFailure ? err.getError() : err;
  const list = typeof error === 'object' && error !== null ? (error as { batchFailures?: unknown }).batchFailures : undefined;
  return Array.isArray(list) ? (list as BatchEntryFailure[]) : undefined;
}
