import { brand } from '../brand.js';
/**
 * A payload with entry headers, for `client.emit(pattern, record)` / `client.send(pattern, record)`.
 * The consumer reads the headers with `ctx.getHeaders()`.
 *
 *   client.emit('orders', new RedisStreamsRecord(order, { traceId }))
 *   client.emit('orders', new RedisStreamsRecord(order, {}, { partitionKey: order.customerId }))
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Record<string, string> = {},
    /**
     * `partitionKey`: on a partitioned stream (the client's `partitions` option), entries with
     * the same key go to the same partition. Without one they are spread round-robin.
     */
    readonly options: { partitionKey?: string } = {},
  ) {
    if (options.partitionKey !== undefined && typeof options.partitionKey !== 'string') {
      throw new TypeError(`partitionKey must be a string, got ${typeof options.partitionKey}`);
    }
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string') throw new TypeError(`header "${name}" must be a string, got ${typeof value}`);
    }
  }
}
brand(RedisStreamsRecord, 'RedisStreamsRecord');
