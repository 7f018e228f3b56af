import type { BatchDecideDeps } from '../consumer/decide-batch.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import type { DispatchPort } from './dispatch-port.js';
import type { StreamPlan } from './plan.js';

/** What every settle needs, built once the telemetry is known (it is never changed after). */
export function settleDepsOf(
  options: ResolvedServerOptions,
  plan: StreamPlan,
  parts: {
    commands: StreamCommands;
    dispatch: DispatchPort;
    logger: Logger;
    telemetry: ConsumerTelemetry | undefined;
    stopping: () => boolean;
  },
): BatchDecideDeps {
  const { commands, dispatch } = parts;
  return {
    commands,
    dispatch: (pattern, entry, args) => dispatch.dispatch(pattern, entry, args, commands),
    dispatchBatch: (pattern, items, args) => dispatch.dispatchBatch(pattern, items, args),
    originOf: (stream) => plan.origins.get(stream) ?? { pattern: stream.slice(options.keyPrefix.length) },
    deserializer: options.deserializer,
    group: options.group,
    consumer: options.consumer,
    keyPrefix: options.keyPrefix,
    maxDeliveries: options.maxDeliveries,
    retry: options.retry,
    unscheduledRetryInMs: Math.max(1, options.minIdleMs - options.leaseRenewMs),
    deadLetterStream: options.deadLetterStream,
    maxEntryBytes: options.maxEntryBytes,
    handlerTimeoutMs: options.handlerTimeoutMs,
    logger: parts.logger,
    telemetry: parts.telemetry,
    stopping: parts.stopping,
  };
}
