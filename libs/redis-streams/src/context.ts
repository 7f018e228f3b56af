import { brand } from './brand.js';
import { BaseRpcContext } from '@nestjs/microservices';
import type { RedisStreamsContextArgs } from './consumer/settle/entry-context.js';
import type { StreamEntryContext } from './core/stream-context.js';

export type { RedisStreamsContextArgs };

/**
 * What `@Ctx()` gives a handler of this transport. No private members: the ESM and CommonJS
 * typings of the class then describe the same shape, so one is assignable to the other in an
 * app whose dependencies load both builds. It must extend Nest's `BaseRpcContext`, so the core's
 * `StreamContext` cannot be its base: both implement one interface, which keeps their getters alike.
 */
export class RedisStreamsContext extends BaseRpcContext<[RedisStreamsContextArgs]> implements StreamEntryContext {
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
