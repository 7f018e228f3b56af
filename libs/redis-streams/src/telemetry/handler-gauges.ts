import type { BatchObservableCallback, Meter } from '@opentelemetry/api';
import type { StreamHandlers } from '../consumer/stuck-watch.js';
import { ATTR, METRIC, SYSTEM } from './semconv.js';

/** Per stream with a handler running: the oldest and the count past `stuckEntryMs` (every reader's). */
export type HandlersSource = () => Map<string, StreamHandlers>;

/**
 * Observable gauges `messaging.redis_streams.stuck` (entries whose handler has run past
 * `stuckEntryMs`) and `messaging.redis_streams.handler.oldest_age_seconds` (how long the oldest running
 * handler has run), per stream, read from the loops when the SDK collects. Returns the function
 * that unregisters them.
 */
export function observeHandlerGauges(meter: Meter, handlers: HandlersSource, streams: readonly string[], group: string): () => void {
  const stuck = meter.createObservableGauge(METRIC.stuck, {
    unit: '{message}',
    description: 'Entries in hand whose handler has run longer than stuckEntryMs',
  });
  const oldest = meter.createObservableGauge(METRIC.oldestHandler, {
    unit: 's',
    description: 'How long the oldest running handler of the stream has run (0: none runs)',
  });
  const attrs = new Map(streams.map((s) => [s, { [ATTR.system]: SYSTEM, [ATTR.destination]: s, [ATTR.group]: group }]));
  const observe: BatchObservableCallback = (result) => {
    const now = handlers();
    for (const [stream, a] of attrs) {
      const h = now.get(stream);
      result.observe(stuck, h?.stuck ?? 0, a);
      result.observe(oldest, (h?.oldest.forMs ?? 0) / 1000, a);
    }
  };
  meter.addBatchObservableCallback(observe, [stuck, oldest]);
  return () => meter.removeBatchObservableCallback(observe, [stuck, oldest]);
}
