import type { PatternHealth, StreamHealth } from './health.js';

/**
 * Each pattern's streams' lag and pending added up, in the order the patterns first appear. A sum with
 * one unknown part is unknown (null): an autoscaler reading a partial sum would see a backlog too small.
 * Streams `patternOf` does not know are left out.
 */
export function patternFigures(streams: readonly StreamHealth[], patternOf: (stream: string) => string | undefined): PatternHealth[] {
  const patterns = new Map<string, PatternHealth>();
  for (const s of streams) {
    const pattern = patternOf(s.stream);
    if (pattern === undefined) continue;
    const sum = patterns.get(pattern) ?? { pattern, streams: 0, lag: 0, pending: 0 };
    sum.streams += 1;
    sum.lag = sum.lag === null || s.lag === null ? null : sum.lag + s.lag;
    sum.pending = sum.pending === null || s.pending === null ? null : sum.pending + s.pending;
    patterns.set(pattern, sum);
  }
  return [...patterns.values()];
}
