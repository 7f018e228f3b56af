import type { GroupStats } from '../health/group-stats.js';
import { describeError } from '../describe-error.js';
import type { Logger } from '../ports.js';
import { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import type { DurabilitySource, HandlersSource } from '../telemetry/handler-gauges.js';
import type { OtelApi } from '../telemetry/otel-api.js';

/**
 * A start's OpenTelemetry side (spans, metrics, the group's and the handlers' gauges), or none:
 * the handlers wait for it, so a broken SDK costs the telemetry, never the consumer.
 */
export function startTelemetry(
  api: OtelApi,
  { group, consumer }: { group: string; consumer: string },
  stats: GroupStats,
  /** The loops' running handlers, and the streams they read. */
  handlers: { source: HandlersSource; streams: readonly string[]; durability?: DurabilitySource },
  logger: Logger,
): ConsumerTelemetry | undefined {
  try {
    return new ConsumerTelemetry(api, group, consumer, stats, handlers);
  } catch (err) {
    logger.warn(`OpenTelemetry unavailable, carrying on without it: ${describeError(err)}`);
    return undefined;
  }
}
