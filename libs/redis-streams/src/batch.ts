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

/** Where a {@link BatchFailure} marks each entry it lists: on the entry's own context, which no interceptor or filter rewrites. */
const FAILED = Symbol.for('nestjs-redis-streams/batch-entry-failed');

/**
 * Throw it from a batch handler to say which entries failed: only those stay pending (or are
 * dead-lettered: a `DeadLetterException` as their error, or their last allowed delivery); the
 * rest of the batch is acked. Any other throw fails the whole batch.
 *
 * Making one marks the entries it lists on their contexts: that mark, not the thrown object,
 * is what the transport reads, so an interceptor that maps results or an exception filter that
 * rewrites errors cannot lose it. Returning it instead of throwing says the same.
 */
export class BatchFailure extends RpcException {
  constructor(failures: Iterable<{ entry: StreamBatchEntry; error?: unknown }>, message?: string) {
    let count = 0;
    for (const { entry, error } of failures) {
      (entry.context as unknown as Record<symbol, unknown>)[FAILED] = { error: error ?? new Error(message ?? 'failed in its batch') };
      count++;
    }
    super({ status: 'error', message: message ?? `${count} entries of the batch failed`, batchFailure: true });
  }

  /** Every entry in `entries` failed with `error`. */
  static of(entries: Iterable<StreamBatchEntry>, error?: unknown): BatchFailure {
    return new BatchFailure([...entries].map((entry) => ({ entry, error })), error instanceof Error ? error.message : undefined);
  }
}
brand(BatchFailure, 'BatchFailure');

/** A {@link BatchFailure}, also as it comes out of Nest's RPC exception filter (its error object). */
export function isBatchFailure(err: unknown): boolean {
  const error = err instanceof BatchFailure ? err.getError() : err;
  return typeof error === 'object' && error !== null && (error as { batchFailure?: unknown }).batchFailure === true;
}

/** The failure a {@link BatchFailure} marked on this entry's context, if any. */
export function failureOf(context: RedisStreamsContext): { error: unknown } | undefined {
  return (context as unknown as Record<symbol, { error: unknown } | undefined>)[FAILED];
}
