import type { BatchObservableCallback, Meter } from '@opentelemetry/api';
import type { StreamHandlers } from '../consumer/watch/stuck-watch.js';
import { ATTR, METRIC, SYSTEM } from './semconv.js';
import type { DurabilityState } from '../consumer/tenure/ack-durability.js';

/** Per stream with a handler running: the oldest and the count past `stuckEntryMs` (every reader's). */
export type HandlersSource = () => Map<string, StreamHandlers>;

/** Per ordered stream this consumer owns with durable acks: where they stand (see AckDurability). */
export type DurabilitySource = () => Map<string, DurabilityState>;

const DURABILITY_STATES: readonly DurabilityState[] = ['pending', 'confirmed', 'held', 'degraded'];

/**
 * Observable gauges `messaging.redis_streams.stuck` (entries whose handler has run past
 * `stuckEntryMs`) and `messaging.redis_streams.handler.oldest_age_seconds` (how long the oldest running
 * handler has run), per stream, read from the loops when the SDK collects. Returns the function
 * that unregisters them.
 */
export function observeHandlerGauges(
  meter: Meter,
  handlers: HandlersSource,
  streams: readonly string[],
  group: string,
  durability?: DurabilitySource,
): () => void {
  const stuck = meter.createObservableGauge(METRIC.stuck, {
    unit: '{message}',
    description: 'Entries in hand whose handler has run longer than stuckEntryMs',
  });
  const oldest = meter.createObservableGauge(METRIC.oldestHandler, {
    unit: 's',
    description: 'How long the oldest running handler of the stream has run (0: none runs)',
  });
  // A state set: per owned stream one series per state, 1 for the one it is in (held or degraded pages someone).
  const durable = meter.createObservableGauge(METRIC.orderedDurability, {
    unit: '1',
    description: "An owned ordered partition's durable acks: 1 for the state they are in (confirmed, held, degraded, pending)",
  });
  const attrs = new Map(streams.map((s) => [s, { [ATTR.system]: SYSTEM, [ATTR.destination]: s, [ATTR.group]: group }]));
  const stateAttrs = new Map<string, Record<string, string>>();
  const stateOf = (stream: string, state: DurabilityState) => {
    const key = `${state}\n${stream}`;
    let a = stateAttrs.get(key);
    if (!a) stateAttrs.set(key, (a = { ...attrs.get(stream), [ATTR.durabilityState]: state }));
    return a;
  };
  const observe: BatchObservableCallback = (result) => {
    const now = handlers();
    for (const [stream, a] of attrs) {
      const h = now.get(stream);
      result.observe(stuck, h?.stuck ?? 0, a);
      result.observe(oldest, (h?.oldest.forMs ?? 0) / 1000, a);
    }
    // Only the owner reports a partition: summed over replicas, a state counts once.
    for (const [stream, state] of durability?.() ?? [])
      for (const s of DURABILITY_STATES) result.observe(durable, s === state ? 1 : 0, stateOf(stream, s));
  };
  meter.addBatchObservableCallback(observe, [stuck, oldest, durable]);
  return () => meter.removeBatchObservableCallback(observe, [stuck, oldest, durable]);
}
