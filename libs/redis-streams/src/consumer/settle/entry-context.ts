import { fieldsToRecord } from '../../codec/entry-codec.js';

/** What a handler's context says about its entry (the Nest adapter wraps it in `RedisStreamsContext`). */
export interface RedisStreamsContextArgs {
  /** Full stream key (prefix included). */
  stream: string;
  /** The handler pattern: the stream key without the transport's `keyPrefix` (a partitioned stream's logical name). */
  pattern: string;
  /** Of a partitioned stream: the partition the entry was read from (`{orders:3}` → 3); otherwise undefined. */
  partition?: number | undefined;
  id: string;
  group: string;
  consumer: string;
  /** Deliveries of this entry to the group so far, this one included (1 on first delivery). */
  deliveryCount: number;
  /** The entry's raw field/value map. */
  fields: Record<string, string>;
  /** The producer's `headers` field (a JSON object of strings); `{}` when absent. */
  headers: Record<string, string>;
}

/** What a batch handler's context says about its call. */
export interface RedisStreamsBatchContextArgs {
  /** The handler pattern (a partitioned stream's logical name). */
  pattern: string;
  group: string;
  consumer: string;
  /** Entries in this call. */
  size: number;
}

/**
 * The args of one delivered entry. `fields` is built from the raw field list on first use:
 * most handlers never ask, and the hot path then allocates no record for it.
 */
export class EntryContextArgs implements RedisStreamsContextArgs {
  private record: Record<string, string> | undefined;

  constructor(
    readonly stream: string,
    readonly pattern: string,
    readonly id: string,
    readonly group: string,
    readonly consumer: string,
    readonly deliveryCount: number,
    readonly headers: Record<string, string>,
    private readonly rawFields: readonly string[],
    readonly partition?: number,
  ) {}

  get fields(): Record<string, string> {
    return (this.record ??= fieldsToRecord(this.rawFields));
  }
}
