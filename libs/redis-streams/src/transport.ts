import { EventPattern } from '@nestjs/microservices';

/** `transportId` of {@link RedisStreamsServer}: handlers bound to it are served by no other transport. */
export const REDIS_STREAMS_TRANSPORT: unique symbol = Symbol.for('nestjs-redis-streams');

/**
 * `@EventPattern(stream)` bound to this transport. Prefer it to a bare `@EventPattern('orders')`:
 * in a hybrid app the handler is not also registered on the other transports, and it avoids
 * Nest 12's typed-overload error (TS1241) when the `@Ctx()` parameter is a `RedisStreamsContext`.
 *
 * `partitions: n` makes `stream` a partitioned stream: n keys `{stream:0}` … `{stream:n-1}`
 * (spread over a cluster's masters), all handled here; `ctx.getPartition()` says which one.
 */
export function StreamPattern(stream: string, extras?: { partitions?: number } & Record<string, unknown>): MethodDecorator {
  return EventPattern<string>(stream, REDIS_STREAMS_TRANSPORT, extras ?? {});
}
