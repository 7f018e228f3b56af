import { decideBatch, type BatchDecideDeps } from '../consumer/settle/decide-batch.js';
import type { DeciderFor } from '../consumer/reader.js';
import { decide, startDecide, workFailed, type DirectDecide, type StreamOrigin } from '../consumer/settle/decide.js';
import type { DeliverySource } from '../consumer/settle/settled-event.js';
import type { StreamEntry } from '../stream-entry.js';
import { tracedDecide, tracedDirect } from '../telemetry/traced-decide.js';
import { KeyRateGate } from '../consumer/intake/key-rate-gate.js';
import { PatternThrottle } from '../consumer/intake/pattern-throttle.js';
import type { Admission } from '../consumer/settle/admission.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import type { DispatchPort, ReplySender } from './dispatch-port.js';
import type { StreamPlan } from './plan.js';

/**
 * The decider (checks, dispatch through the host's port, the outcome), built once the telemetry is
 * known and before any reader (it is never changed after); each reader binds it to its own stop
 * signal, which bounds a dead-letter move begun while stopping, and to its server offer (whether a
 * move deletes the entry from its stream).
 */
export function deciderOf(
  options: ResolvedServerOptions,
  plan: StreamPlan,
  parts: {
    commands: StreamCommands;
    dispatch: DispatchPort;
    logger: Logger;
    telemetry: ConsumerTelemetry | undefined;
  },
): DeciderFor {
  const { commands, dispatch } = parts;
  const gates = admissions(options, plan, commands, parts.logger);
  // The host gets reply() alone, not the commands object a cast would open.
  const replies: ReplySender = { reply: (replyTo, fields, ttlMs) => commands.reply(replyTo, fields, ttlMs) };
  const shared: BatchDecideDeps = {
    commands,
    dispatch: (pattern, entry, args) => dispatch.dispatch(pattern, entry, args, replies),
    dispatchBatch: (pattern, items, args) => dispatch.dispatchBatch(pattern, items, args),
    originOf: lastOriginOf((stream) => plan.origins.get(stream) ?? { pattern: stream.slice(options.keyPrefix.length) }),
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
    // Asked per entry: with no gate (no rate limit), no lookup.
    admissionOf: gates.size === 0 ? () => undefined : (stream) => gates.get(stream),
  };
  return (stop, offer) => {
    const deps: BatchDecideDeps = { ...shared, stopping: () => stop.stopped, stopped$: stop.stopped$, ackDelete: () => offer.ackDelete };
    // With telemetry, each entry's decide is traced from above (telemetry/traced-decide.ts); without, decide alone.
    const one = parts.telemetry
      ? tracedDecide(parts.telemetry, deps)
      : (entry: StreamEntry, source: DeliverySource) => decide(deps, entry, source);
    // The batch settler awaits each untraced handler itself (no promise of decide's own per entry).
    const direct: DirectDecide = parts.telemetry
      ? tracedDirect(parts.telemetry, deps)
      : {
          start: (entry, source) => startDecide(deps, entry, source),
          failed: (entry, source, error) => workFailed(deps, entry, source, error),
        };
    return { one, batch: (entries, source) => decideBatch(deps, entries, source), direct };
  };
}

/** `originOf`, remembering the last stream's answer: asked per entry, and one read's entries share their stream. */
function lastOriginOf(originOf: (stream: string) => StreamOrigin): (stream: string) => StreamOrigin {
  let last: string | undefined;
  let origin: StreamOrigin | undefined;
  return (stream) => {
    if (stream !== last || origin === undefined) {
      origin = originOf(stream);
      last = stream;
    }
    return origin;
  };
}

/** Each rate-limited stream's admission, one per pattern (its partitions share it): the plan's intake at an entry's start. */
function admissions(options: ResolvedServerOptions, plan: StreamPlan, commands: StreamCommands, logger: Logger): Map<string, Admission> {
  const byPattern = new Map<string, Admission>();
  const gates = new Map<string, Admission>();
  for (const [stream, { pattern, rateLimit, keyRateLimit }] of plan.origins) {
    if (!rateLimit && !keyRateLimit) continue;
    let gate = byPattern.get(pattern);
    if (!gate) {
      const common = { pattern, name: options.keyPrefix + pattern, limits: commands.rateLimits, consumer: options.consumer };
      gate = keyRateLimit
        ? new KeyRateGate({ ...common, limit: keyRateLimit, logger, heldTtlMs: options.minIdleMs })
        : new PatternThrottle(common);
      byPattern.set(pattern, gate);
    }
    gates.set(stream, gate);
  }
  return gates;
}
