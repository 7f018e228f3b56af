import { printableClassOf } from '../describe-error.js';

/**
 * Names from the OpenTelemetry messaging semantic conventions, and this transport's own
 * (`messaging.redis_streams.*`). Written out rather than taken from
 * `@opentelemetry/semantic-conventions`, which would be a dependency for a dozen strings.
 */
export const ATTR = {
  system: 'messaging.system',
  operationName: 'messaging.operation.name',
  operationType: 'messaging.operation.type',
  destination: 'messaging.destination.name',
  partition: 'messaging.destination.partition.id',
  group: 'messaging.consumer.group.name',
  clientId: 'messaging.client.id',
  messageId: 'messaging.message.id',
  conversationId: 'messaging.message.conversation_id',
  errorType: 'error.type',
  deliveryCount: 'messaging.redis_streams.delivery_count',
  deliverySource: 'messaging.redis_streams.delivery_source',
  outcome: 'messaging.redis_streams.outcome',
  deadLetterId: 'messaging.redis_streams.dead_letter_id',
  retryIn: 'messaging.redis_streams.retry_in_ms',
  batchSize: 'messaging.batch.message_count',
  durabilityState: 'messaging.redis_streams.durability_state',
} as const;

/** `messaging.system`: Redis is not among the conventions' listed systems, so its own name. */
export const SYSTEM = 'redis';

/**
 * Instrument names, one prefix (`messaging.redis_streams.`), each duration's base unit in its name:
 * as Prometheus scrapes them, the in-process PrometheusExporter (which only adds `_total` to counters)
 * and the Collector's (which adds a unit suffix the name does not carry already) then agree on
 * `messaging_redis_streams_process_duration_seconds`, `…_consumed_messages_total` and so on. The
 * messaging conventions' `messaging.process.duration` and `messaging.client.consumed.messages` are
 * the first two under those names (their attributes are the conventions').
 */
export const METRIC = {
  processDuration: 'messaging.redis_streams.process.duration_seconds',
  consumed: 'messaging.redis_streams.consumed.messages',
  lag: 'messaging.redis_streams.lag',
  pending: 'messaging.redis_streams.pending',
  deadLetters: 'messaging.redis_streams.dead_letters',
  statsAge: 'messaging.redis_streams.stats.age_seconds',
  stuck: 'messaging.redis_streams.stuck',
  oldestHandler: 'messaging.redis_streams.handler.oldest_age_seconds',
  retryDelay: 'messaging.redis_streams.retry.delay_seconds',
  sent: 'messaging.redis_streams.sent.messages',
  sendDuration: 'messaging.redis_streams.send.duration_seconds',
  orderedDurability: 'messaging.redis_streams.ordered.durability',
} as const;

/** Buckets of the retry delay histogram (seconds): from a quick retry to a day's backoff. */
export const RETRY_DELAY_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 86_400];

/** The messaging conventions' advised buckets for a process or send duration (seconds). */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/** The tracer's and meter's name (the instrumentation scope). */
export const SCOPE = 'nestjs-redis-streams';

/** `error.type`: the error's class name, escaped and short, as the conventions ask; `_OTHER` for a thrown non-Error. */
export function errorType(error: unknown): string {
  return error instanceof Error ? printableClassOf(error) : OTHER_ERROR_TYPE;
}

/** The conventions' value for an error of no known type (and, here, past MAX_ERROR_TYPES). */
export const OTHER_ERROR_TYPE = '_OTHER';

/** Distinct `error.type` values a consumer reports: handlers name their errors, so cardinality stays bounded. */
export const MAX_ERROR_TYPES = 100;
