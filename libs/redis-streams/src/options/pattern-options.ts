import type { StreamBatchOptions } from './batch-options.js';
import type { RetryPolicy } from './retry-options.js';
import type { RateLimit } from './rate-limit-options.js';
import type { DurableAcks } from './durability-options.js';
import type { FairGroups } from './fair-options.js';
import type { Priorities } from './priority-options.js';
import { rejectUnknown } from './validate.js';

/** What `@StreamPattern(stream, extras)` takes. No index signature: a typo (`bach`) does not compile. */
export interface StreamPatternExtras {
  /** n keys `{stream:0}` … `{stream:n-1}`, 1 to 64. Default: one plain key. */
  partitions?: number;
  batch?: StreamBatchOptions;
  /** This pattern's retry policy, in place of the server's `retry` (see RedisStreamsServerOptions.retry). */
  retry?: RetryPolicy;
  /**
   * Entries with the same key (the record's `partitionKey`) are handled one at a time, in stream
   * order, across retries, restarts and workers; different keys run `concurrency` at a time. Each
   * partition has one owner in the group at a time (docs/guide/ordering.md). Default: false.
   */
  ordered?: boolean;
  /**
   * At most `max` entries of this pattern started per `perMs`, by every consumer of the group
   * together (a sliding window in Redis, on its clock); entries over it wait unread in the stream.
   * With `perKey`, at most `max` of each key (the partition key, or a function's): entries over
   * it wait pending, their delivery not counted. Not with `batch`; a pattern's limit not with
   * `ordered` (a key's is). See docs/guide/flow-control.md. Default: none.
   */
  rateLimit?: RateLimit;
  /**
   * This ordered pattern's durable acks, in place of the server's `durableAcks` (`false`: none): see
   * RedisStreamsServerOptions.durableAcks. Only with `ordered`. Default: the server's.
   */
  durableAcks?: DurableAcks | false;
  /**
   * Fair groups: at most `inHand` entries of one key (the record's `partitionKey`, or a function's)
   * in hand at once, by every worker of the group together, and keys served round-robin, so a key
   * with a deep backlog cannot starve the others. Not with `ordered` (the in-order `inHand: 1`
   * case) or `batch`. See docs/guide/fair-groups.md. Default: none.
   */
  fair?: FairGroups;
  /**
   * Priority levels: a record's `priority` (0 to `levels - 1`) picks the stream it is written to, and higher
   * levels are read first, with a guard against starvation (`lowerEvery`). Not with `ordered`, `fair` or
   * `batch`. See docs/guide/priorities.md. Default: none (one level).
   */
  priorities?: Priorities;
}

/**
 * Marks the extras `@StreamPattern` wrote (Nest copies symbol keys along). Only those are ours
 * alone: a bare `@EventPattern`'s extras may be meant for another transport (MQTT's `qos`).
 */
export const STREAM_PATTERN_EXTRAS: unique symbol = Symbol.for('nestjs-redis-streams.stream-pattern');

const KNOWN_EXTRAS: readonly (keyof StreamPatternExtras)[] = [
  'partitions',
  'batch',
  'retry',
  'ordered',
  'rateLimit',
  'durableAcks',
  'fair',
  'priorities',
];

/**
 * A typo in `@StreamPattern`'s (or `handle`'s) extras would otherwise silently keep the default (a
 * single-entry handler). `registered` names the registration: `@StreamPattern('orders')`.
 */
export function checkPatternExtras(registered: string, extras: object): void {
  if (STREAM_PATTERN_EXTRAS in extras) rejectUnknown(extras, KNOWN_EXTRAS, `${registered} `);
}
