import { brand } from './brand.js';
import { BaseRpcContext } from '@nestjs/microservices';
import { fieldsToRecord } from './codec/entry-codec.js';

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

/**
 * What `@Ctx()` gives a handler of this transport. No private members: the ESM and CommonJS
 * typings of the class then describe the same shape, so one is assignable to the other in an
 * app whose dependencies load both builds.
 */
export class RedisStreamsContext extends BaseRpcContext<[RedisStreamsContextArgs]> {
  constructor(args: RedisStreamsContextArgs) {
    super([args]);
  }

  getStream(): string {
    return this.args[0].stream;
  }

  getPattern(): string {
    return this.args[0].pattern;
  }

  getId(): string {
    return this.args[0].id;
  }

  getGroup(): string {
    return this.args[0].group;
  }

  getConsumer(): string {
    return this.args[0].consumer;
  }

  getDeliveryCount(): number {
    return this.args[0].deliveryCount;
  }

  getFields(): Record<string, string> {
    return this.args[0].fields;
  }

  getHeaders(): Record<string, string> {
    return this.args[0].headers;
  }

  /** The partition of a partitioned stream the entry came from; undefined for a plain stream. */
  getPartition(): number | undefined {
    return this.args[0].partition;
  }
}
brand(RedisStreamsContext, 'RedisStreamsContext');
