export { RedisStreamsServer } from './server/redis-streams.server.js';
export { RedisStreamsStatus, type RedisStreamsEvents, type SettledEvent, type SettleOutcome } from './server/events.js';
export { RedisStreamsContext, type RedisStreamsContextArgs } from './context.js';
export { REDIS_STREAMS_TRANSPORT, StreamPattern } from './transport.js';
export { InvalidOptionError, SERVER_DEFAULTS, type RedisStreamsServerOptions } from './options.js';
export { EntryDecodeError, DATA_FIELD } from './codec/entry-codec.js';
export type { DeliverySource } from './redis/stream-entry.js';
