import { brand } from '../brand.js';
/**
 * A payload with entry headers, for `client.emit(pattern, record)` / `client.send(pattern, record)`.
 * The consumer reads the headers with `ctx.getHeaders()`.
 *
 *   client.emit('orders', new RedisStreamsRecord(order, { traceId }))
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Record<string, string> = {},
  ) {
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string') throw new TypeError(`header "${name}" must be a string, got ${typeof value}`);
    }
  }
}
brand(RedisStreamsRecord, 'RedisStreamsRecord');
