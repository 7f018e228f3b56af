import { MAX_BATCH_SIZE, MAX_BLOCK_MS } from './server-options.js';
import { atMost, InvalidOptionError, positiveInt, rejectUnknown } from './validate.js';

/** `@StreamPattern(stream, { batch })`: the handler gets an array of entries per call. */
export interface StreamBatchOptions {
  /** Most entries per handler call, at most {@link MAX_BATCH_SIZE}. Required. */
  maxSize: number;
  /**
   * How long a batch that is not full may wait for more entries, counted from when its first
   * entry arrived: it is handed over when full or when this runs out, never later. 0 hands over
   * what one read returns. At most a day. Default: 0.
   */
  maxWaitMs?: number;
}

export type ResolvedBatchOptions = Required<StreamBatchOptions>;

/** `batch` of a `@StreamPattern`, validated. */
export function resolveBatchOptions(what: string, value: unknown): ResolvedBatchOptions {
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(`${what} batch`, 'must be { maxSize, maxWaitMs? }');
  rejectUnknown(value, ['maxSize', 'maxWaitMs'], `${what} batch.`);
  const { maxSize, maxWaitMs } = value as { maxSize?: unknown; maxWaitMs?: unknown };
  if (maxSize === undefined) throw new InvalidOptionError(`${what} batch.maxSize`, 'is required: the most entries per handler call');
  const waitMs =
    maxWaitMs === 0 ? 0 : atMost(`${what} batch.maxWaitMs`, positiveInt(`${what} batch.maxWaitMs`, maxWaitMs, 0), MAX_BLOCK_MS);
  return { maxSize: atMost(`${what} batch.maxSize`, positiveInt(`${what} batch.maxSize`, maxSize, 0), MAX_BATCH_SIZE), maxWaitMs: waitMs };
}
