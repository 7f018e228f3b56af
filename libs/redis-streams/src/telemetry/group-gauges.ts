import type { BatchObservableCallback, Meter } from '@opentelemetry/api';
import type { GroupStats } from '../health/group-stats.js';
import { within } from '../within.js';
import { ATTR, METRIC, SYSTEM } from './semconv.js';

/** Gauges read XINFO GROUPS at most this often, however often they are collected. */
export const GAUGE_STATS_MAX_AGE_MS = 5000;

/** A collection waits this long for Redis; past it (Redis down) the gauges report the last figures, and their age says how old. */
const COLLECT_WITHIN_MS = 1000;

/**
 * Observable gauges `messaging.redis_streams.lag`, `.pending` and `.dead_letters` per stream of the
 * group, read only when the SDK collects (a scrape), from the shared {@link GroupStats}, and
 * `messaging.redis_streams.stats.age_seconds`: how old those figures are (a cumulative exporter repeats
 * the last values while Redis does not answer; the age is what tells). Returns the function
 * that unregisters them.
 */
export function observeGroupGauges(meter: Meter, stats: GroupStats, group: string): () => void {
  const lag = meter.createObservableGauge(METRIC.lag, {
    unit: '{message}',
    description: 'Entries of the stream not yet delivered to the consumer group',
  });
  const pending = meter.createObservableGauge(METRIC.pending, {
    unit: '{message}',
    description: 'Entries delivered to the consumer group and not yet acked',
  });
  const dead = meter.createObservableGauge(METRIC.deadLetters, {
    unit: '{message}',
    description: "Letters in the stream's dead-letter stream: entries no retry could handle",
  });
  const age = meter.createObservableGauge(METRIC.statsAge, {
    unit: 's',
    description: 'Age of the lag and pending figures (XINFO GROUPS): grows while Redis does not answer',
  });
  const groupAttrs = { [ATTR.system]: SYSTEM, [ATTR.group]: group };
  const attrs = new Map<string, Record<string, string>>();
  const attrsOf = (stream: string) => {
    let a = attrs.get(stream);
    if (!a) attrs.set(stream, (a = { [ATTR.system]: SYSTEM, [ATTR.destination]: stream, [ATTR.group]: group }));
    return a;
  };
  const observe: BatchObservableCallback = async (result) => {
    const reading =
      (await within(
        stats.get(GAUGE_STATS_MAX_AGE_MS).catch(() => undefined),
        COLLECT_WITHIN_MS,
        undefined,
      )) ?? stats.latest();
    if (!reading) return;
    result.observe(age, Math.max(0, Date.now() - reading.at) / 1000, groupAttrs);
    for (const s of reading.stats) {
      if (s.lag !== null) result.observe(lag, s.lag, attrsOf(s.stream));
      result.observe(pending, s.pending, attrsOf(s.stream));
      if (s.deadLetters !== null) result.observe(dead, s.deadLetters, attrsOf(s.stream));
    }
  };
  meter.addBatchObservableCallback(observe, [lag, pending, dead, age]);
  return () => meter.removeBatchObservableCallback(observe, [lag, pending, dead, age]);
}
