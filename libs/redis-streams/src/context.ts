import { brand } from './brand.js';
import { BaseRpcContext } from '@nestjs/microservices';
import { fieldsToRecord } from './codec/entry-codec.js';

export interface RedisStreamsContextArgs {
  /** Full stream key (prefix included). */
  stream: string;
  /** The handler pattern: the stream key without the transport's `keyPrefix`. */
  pattern: string;
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
  ) {}

  get fields(): Record<string, string> {
    return (this.record ??= fieldsToRecord(this.rawFields));
  }
}

/** What `@Ctx()` gives a handler of this transport. */
export class RedisStreamsContext extends BaseRpcContext<[RedisStreamsContextArgs]> {
  constructor(args: RedisStreamsContextArgs) {
    super([args]);
  }

  private get a(): RedisStreamsContextArgs {
    return this.args[0];
  }

  getStream(): string {
    return this.a.stream;
  }

  getPattern(): string {
    return this.a.pattern;
  }

  getId(): string {
    return this.a.id;
  }

  getGroup(): string {
    return this.a.group;
  }

  getConsumer(): string {
    return this.a.consumer;
  }

  getDeliveryCount(): number {
    return this.a.deliveryCount;
  }

  getFields(): Record<string, string> {
    return this.a.fields;
  }

  getHeaders(): Record<string, string> {
    return this.a.headers;
  }
}
brand(RedisStreamsContext, 'RedisStreamsContext');
