import { brand } from '../brand.js';
import type { RedisStreamsBatchContextArgs, RedisStreamsContextArgs } from '../consumer/settle/entry-context.js';

/**
 * What a handler learns of its entry, whichever host called it: `StreamContext` (core) and
 * `RedisStreamsContext` (Nest, which must extend Nest's `BaseRpcContext`) both implement it.
 */
export interface StreamEntryContext {
  /** Full stream key (prefix included). */
  getStream(): string;
  /** The handler's pattern: the stream key without `keyPrefix` (a partitioned stream's logical name). */
  getPattern(): string;
  getId(): string;
  getGroup(): string;
  getConsumer(): string;
  /** Deliveries of this entry to the group so far, this one included (1 on first delivery). */
  getDeliveryCount(): number;
  /** The entry's raw field/value map. */
  getFields(): Record<string, string>;
  /** The producer's `headers` field; `{}` when absent. */
  getHeaders(): Record<string, string>;
  /** The partition of a partitioned stream the entry came from; undefined for a plain stream. */
  getPartition(): number | undefined;
}

/**
 * What `handle(stream, handler)` gives the handler beside the payload. No private members: the
 * ESM and CommonJS typings then describe one shape (an app may load both builds).
 */
export class StreamContext implements StreamEntryContext {
  constructor(readonly args: RedisStreamsContextArgs) {}

  getStream(): string {
    return this.args.stream;
  }

  getPattern(): string {
    return this.args.pattern;
  }

  getId(): string {
    return this.args.id;
  }

  getGroup(): string {
    return this.args.group;
  }

  getConsumer(): string {
    return this.args.consumer;
  }

  getDeliveryCount(): number {
    return this.args.deliveryCount;
  }

  getFields(): Record<string, string> {
    return this.args.fields;
  }

  getHeaders(): Record<string, string> {
    return this.args.headers;
  }

  getPartition(): number | undefined {
    return this.args.partition;
  }
}
brand(StreamContext, 'StreamContext');

/** What a batch handler gets beside its entries (each entry has its own {@link StreamContext}). */
export class StreamBatchContext {
  constructor(readonly args: RedisStreamsBatchContextArgs) {}

  getPattern(): string {
    return this.args.pattern;
  }

  getGroup(): string {
    return this.args.group;
  }

  getConsumer(): string {
    return this.args.consumer;
  }

  getSize(): number {
    return this.args.size;
  }
}
brand(StreamBatchContext, 'StreamBatchContext');
