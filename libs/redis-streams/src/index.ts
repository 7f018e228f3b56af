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
