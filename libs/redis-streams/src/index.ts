export { RedisStreamsServer } from './server/redis-streams.server.js';
export type { RedisStreamsEvents } from './server/events.js';
export type { DeliverySource, SettledEvent, SettleOutcome } from './consumer/settle/settled-event.js';
export { RedisStreamsStatus } from './status.js';
export { RedisStreamsClient, type ClientSchedules, type RedisStreamsClientEvents } from './client/redis-streams.client.js';
export { RedisStreamsRecord, type RecordOptions } from './client/record.js';
export { CLIENT_DEFAULTS, type RedisStreamsClientOptions } from './options/client-options.js';
export type { DeadLetterRetention, RetentionPolicy } from './options/retention-options.js';
export { RedisStreamsContext, type RedisStreamsContextArgs } from './context.js';
export { BatchFailure, RedisStreamsBatchContext, type RedisStreamsBatchContextArgs, type StreamBatchEntry } from './batch.js';
export type { StreamBatchOptions } from './options/batch-options.js';
export type { StreamPatternExtras } from './options/pattern-options.js';
export { REDIS_STREAMS_TRANSPORT, StreamPattern } from './transport.js';
export { MAX_BATCH_SIZE, SERVER_DEFAULTS, type DeleteOnAck, type RedisStreamsServerOptions } from './options/server-options.js';
export { InvalidOptionError } from './options/validate.js';
export { EntryDecodeError } from './codec/entry-codec.js';
export { FIELD } from './codec/wire-format.js';
export { JsonDeserializer, JsonSerializer } from './codec/json.js';
export { DeadLetterException, isDeadLetter } from './dead-letter.exception.js';
export { RetryLaterException } from './retry-later.exception.js';
export { RateLimitedException } from './rate-limited.exception.js';
export type { RateLimit, RateLimitKeyOf } from './options/rate-limit-options.js';
export type { FairGroups, FairKeyOf } from './options/fair-options.js';
export type { Priorities } from './options/priority-options.js';
export { MAX_RETRY_DELAY_MS, type RetryBackoff, type RetryPolicy } from './options/retry-options.js';
export type { DeadLetter } from './codec/dead-letter-codec.js';
export { DeadLetters, type RedriveResult } from './dlq/dead-letters.js';
// Flow control for tools and producers of their own (docs/guide/flow-control.md): a stream's schedule of delayed entries, a pattern's pause flag.
export { DelayedCommands, type DueTime } from './redis/upkeep/delayed-commands.js';
export { delayedKeysOf, pauseKeyOf, type DelayedKeys } from './key-names.js';
export { PauseCommands } from './redis/intake/pause-commands.js';
// Repeatable schedules (docs/guide/schedules.md): on a connection of your own; the client's `schedules` is the same with its key prefix.
export {
  Schedules,
  isReadableSchedule,
  type ScheduleInfo,
  type SetScheduleResult,
  type UnreadableSchedule,
} from './redis/upkeep/schedules.js';
export type { ScheduleSpec } from './options/schedule-options.js';
export type { CatchUp } from './schedule-times.js';
export { MAX_PARTITIONS, partitionKey, partitionKeys, partitionOf } from './partitions.js';
export type { ClusterConnection, ConnectionOption } from './options/connection.js';
export {
  checkLiveness,
  checkReadiness,
  DEFAULT_REDIS_DOWN_MS,
  type HealthThresholds,
  type HealthVerdict,
  type PatternHealth,
  type RedisStreamsHealth,
  type StreamHealth,
} from './health/health.js';
export { maskUrl, redactError, RedisStreamsError, UnsupportedServerError } from './redact.js';
export { NotDurableError } from './redis/produce/not-durable-error.js';
export type { Confirmation } from './redis/produce/replication-wait.js';
export type { Durability, DurableAcks, WhenUnconfirmed } from './options/durability-options.js';
export { escapeControl, safeJson } from './escape-control.js';
export {
  RedisStreamsDashboardModule,
  type RedisStreamsDashboardModuleAsyncOptions,
  type RedisStreamsDashboardModuleOptions,
} from './server/redis-streams-dashboard.module.js';
export { createDashboardHandler, type DashboardHandler } from './dashboard/dashboard-http.js';
export { DASHBOARD_DEFAULTS, type DashboardAuthorize, type DashboardOptions } from './dashboard/dashboard-options.js';
export { serveDashboard, type DashboardServerOptions, type ServedDashboard } from './dashboard/dashboard-server.js';
// Types the API above names in its signatures: exported so that users can name them too (the API report lists none
// as forgotten).
export type { DashboardGuard } from './server/redis-streams-dashboard.module.js';
export type { DelayedLook, PauseState, Promotion } from './redis/replies/replies.js';
export type { Deserializer, Serializer } from './ports.js';
export type { FeatureName } from './redis/server-features.js';
export type { OnceWrite } from './redis/produce/idempotent-add.js';
export type { StreamOrdering } from './health/health.js';
export type { PromoteBudget } from './redis/upkeep/delayed-commands.js';
export type { RawCommand } from './redis/produce/replication-wait.js';
export type { RedisConnection } from './redis/connection/connect.js';
export type { RedriveOptions } from './dlq/dead-letters.js';
export type { ReportedConnection } from './redis/connection/reported-connection.js';
export type { ResolvedClientOptions } from './options/client-options.js';
export type { ResolvedDurability } from './options/durability-options.js';
export type { ResolvedServerOptions } from './options/server-options.js';
export type { ScheduleCommands } from './redis/upkeep/schedule-commands.js';
export type { StreamEntryContext } from './core/stream-context.js';
export { FEATURE_NAMES } from './redis/server-features.js';
export type { FireOrder } from './redis/upkeep/schedule-commands.js';
export type { FireOutcome } from './redis/replies/schedule-replies.js';
export type { IdempotencyWindow } from './options/client-options.js';
export type { ResolvedConnection } from './options/connection.js';
export type { ResolvedDurableAcks } from './options/durability-options.js';
export type { RetryDelay } from './options/retry-options.js';
export type { ScheduleKeys } from './key-names.js';
export type { ScheduleLook } from './redis/replies/schedule-replies.js';
export type { SchedulePage } from './redis/replies/schedule-replies.js';
export type { ScheduleSetReply } from './redis/replies/schedule-replies.js';
export type { ScheduleState } from './redis/replies/schedule-replies.js';
export type { StoredSchedule } from './redis/replies/schedule-replies.js';
export type { StreamDurability } from './health/health.js';
export type { ResolvedCluster } from './options/connection.js';
export type { ScheduleLookRow } from './redis/replies/schedule-replies.js';
export type { DueSchedule } from './redis/replies/schedule-replies.js';
export type { UnsetServerOption } from './options/server-options.js';
// Not `Logger`: Nest's own Logger has that name.
export type { Logger as RedisStreamsLogger } from './ports.js';
