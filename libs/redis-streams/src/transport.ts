import { EventPattern } from '@nestjs/microservices';
import { STREAM_PATTERN_EXTRAS, type StreamPatternExtras } from './options/pattern-options.js';

/** `transportId` of {@link RedisStreamsServer}: handlers bound to it are served by no other transport. */
export const REDIS_STREAMS_TRANSPORT: unique symbol = Symbol.for('nestjs-redis-streams');

/**
 * `@EventPattern(stream)` bound to this transport. Prefer it to a bare `@EventPattern('orders')`:
 * in a hybrid app the handler is not also registered on the other transports, and it avoids
 * Nest 12's typed-overload error (TS1241) when the `@Ctx()` parameter is a `RedisStreamsContext`.
 *
 * `partitions: n` makes `stream` a partitioned stream: n keys `{stream:0}` … `{stream:n-1}`
 * (spread over a cluster's masters), all handled here; `ctx.getPartition()` says which one.
 *
 * `batch: { maxSize, maxWaitMs? }` makes it a batch handler: `@Payload()` is an array of
 * `StreamBatchEntry` (up to `maxSize`), `@Ctx()` a `RedisStreamsBatchContext`; one Nest
 * dispatch and one XACK per call. Its streams get a reader (and blocking connection) of their own.
 *
 * Any other key is refused: at compile time for a literal, at `listen` always (`InvalidOptionError`).
 */
export function StreamPattern(stream: string, extras: StreamPatternExtras = {}): MethodDecorator {
  return EventPattern<string>(stream, REDIS_STREAMS_TRANSPORT, { ...extras, [STREAM_PATTERN_EXTRAS]: true });
}
