// `nestjs-redis-streams/core`: the consumer without Nest. Nothing reachable from here imports
// `@nestjs/*` (ESLint forbids it; test/core-no-nest.e2e.spec.ts fails on any such resolution).
export { StreamConsumer, type StreamBatchExtras, type StreamConsumerOptions } from './stream-consumer.js';
export type { StreamBatchHandler, StreamHandler } from './registered-handlers.js';
export { StreamBatchContext, StreamContext, type StreamEntryContext } from './stream-context.js';
export { BatchFailureError, type BatchEntry } from './batch-failure-error.js';
export { DeadLetterError } from './dead-letter-error.js';
export { RetryLaterError } from './retry-later-error.js';
export { RateLimitedError } from './rate-limited-error.js';
export { isDeadLetter } from '../dead-letter-mark.js';
export type { RedisStreamsBatchContextArgs, RedisStreamsContextArgs } from '../consumer/settle/entry-context.js';
export type { RedisStreamsEvents } from '../engine/events.js';
export type { DeliverySource, SettledEvent, SettleOutcome } from '../consumer/settle/settled-event.js';
export type { Logger, Serializer, Deserializer } from '../ports.js';
export type { RateLimit, RateLimitKeyOf } from '../options/rate-limit-options.js';
export type { FairGroups, FairKeyOf } from '../options/fair-options.js';
export type { Priorities } from '../options/priority-options.js';
export { RedisStreamsStatus } from '../status.js';
export type { StreamBatchOptions } from '../options/batch-options.js';
export type { StreamPatternExtras } from '../options/pattern-options.js';
export { MAX_BATCH_SIZE, SERVER_DEFAULTS, type DeleteOnAck, type RedisStreamsServerOptions } from '../options/server-options.js';
export { InvalidOptionError } from '../options/validate.js';
export { EntryDecodeError } from '../codec/entry-codec.js';
export { FIELD } from '../codec/wire-format.js';
export { JsonDeserializer, JsonSerializer } from '../codec/json.js';
export { MAX_RETRY_DELAY_MS, type RetryBackoff, type RetryPolicy } from '../options/retry-options.js';
export type { DeadLetterRetention, RetentionPolicy } from '../options/retention-options.js';
export type { DeadLetter } from '../codec/dead-letter-codec.js';
export { DeadLetters, type RedriveResult } from '../dlq/dead-letters.js';
export { MAX_PARTITIONS, partitionKey, partitionKeys, partitionOf } from '../partitions.js';
// Repeatable schedules (docs/guide/schedules.md): on a connection of your own; the client's `schedules` is the same with its key prefix.
export {
  Schedules,
  isReadableSchedule,
  type ScheduleInfo,
  type SetScheduleResult,
  type UnreadableSchedule,
} from '../redis/upkeep/schedules.js';
export type { ScheduleSpec } from '../options/schedule-options.js';
export type { CatchUp } from '../schedule-times.js';
export type { ClusterConnection, ConnectionOption } from '../options/connection.js';
export {
  checkLiveness,
  checkReadiness,
  DEFAULT_REDIS_DOWN_MS,
  type HealthThresholds,
  type HealthVerdict,
  type PatternHealth,
  type RedisStreamsHealth,
  type StreamHealth,
} from '../health/health.js';
export { maskUrl, redactError, RedisStreamsError, UnsupportedServerError } from '../redact.js';
export { createDashboardHandler, type DashboardHandler } from '../dashboard/dashboard-http.js';
export { DASHBOARD_DEFAULTS, type DashboardAuthorize, type DashboardOptions } from '../dashboard/dashboard-options.js';
export { serveDashboard, type DashboardServerOptions, type ServedDashboard } from '../dashboard/dashboard-server.js';
// Types the API above names in its signatures: exported so that users can name them too.
export type { DurableAcks } from '../options/durability-options.js';
export type { EntryFailure } from '../batch-failure-mark.js';
export type { FeatureName } from '../redis/server-features.js';
export type { RedisConnection } from '../redis/connection/connect.js';
export type { RedriveOptions } from '../dlq/dead-letters.js';
export type { ResolvedServerOptions } from '../options/server-options.js';
export type { StreamOrdering } from '../health/health.js';
export type { Durability } from '../options/durability-options.js';
export { FEATURE_NAMES } from '../redis/server-features.js';
export type { ResolvedConnection } from '../options/connection.js';
export type { ResolvedDurableAcks } from '../options/durability-options.js';
export type { RetryDelay } from '../options/retry-options.js';
export type { StreamDurability } from '../health/health.js';
export type { WhenUnconfirmed } from '../options/durability-options.js';
export type { ResolvedCluster } from '../options/connection.js';
export type { ResolvedDurability } from '../options/durability-options.js';
export type { UnsetServerOption } from '../options/server-options.js';
