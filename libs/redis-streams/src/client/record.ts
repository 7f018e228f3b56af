import { brand } from '../brand.js';

/** A record's options: where it goes on a partitioned stream, and whether a repeat of it is written. */
export interface RecordOptions {
  /**
   * On a partitioned stream (the client's `partitions` option), entries with the same key go to
   * the same partition. Without one they are spread round-robin (or routed by `idempotencyKey`).
   * Written with the entry on every stream (field `partitionKey`): an ordered pattern
   * (`@StreamPattern(p, { ordered: true })`) handles one key's entries one at a time, in order.
   */
  partitionKey?: string;
  /**
   * At most one entry per key in the stream's window (the client's `idempotency` option): a repeat
   * writes nothing and resolves with the first entry's id. See docs/guide/producing.md.
   */
  idempotencyKey?: string;
}

/**
 * A payload with entry headers, for `client.emit(pattern, record)` / `client.send(pattern, record)`.
 * The consumer reads the headers with `ctx.getHeaders()`.
 *
 *   client.emit('orders', new RedisStreamsRecord(order, { traceId }))
 *   client.emit('orders', new RedisStreamsRecord(order, {}, { partitionKey: order.customerId }))
 *   client.emit('orders', new RedisStreamsRecord(order, {}, { idempotencyKey: `order-${order.id}` }))
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Record<string, string> = {},
    readonly options: RecordOptions = {},
  ) {
    if (options.partitionKey !== undefined && typeof options.partitionKey !== 'string') {
      throw new TypeError(`partitionKey must be a string, got ${typeof options.partitionKey}`);
    }
    // Redis refuses an empty IDMP id; a non-string would be written as whatever String() makes of it.
    if (options.idempotencyKey !== undefined && (typeof options.idempotencyKey !== 'string' || options.idempotencyKey === '')) {
      const got = typeof options.idempotencyKey === 'string' ? 'an empty string' : typeof options.idempotencyKey;
      throw new TypeError(`idempotencyKey must be a non-empty string, got ${got}`);
    }
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string') throw new TypeError(`header "${name}" must be a string, got ${typeof value}`);
    }
  }
}
brand(RedisStreamsRecord, 'RedisStreamsRecord');
