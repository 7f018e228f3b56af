import type { StreamReport } from '../cli/inspect.js';

/** Entries per second over the last refresh, and the recent history for a sparkline. */
export interface StreamRates {
  /** Entries added per second; null until two refreshes have been seen. */
  producedPerSec: number | null;
  /** Per group: entries read per second; null until two refreshes (or without `entries-read`). */
  consumedPerSec: Record<string, number | null>;
  /** Produced per second at each of the last refreshes, oldest first (at most HISTORY). */
  producedHistory: number[];
}

/** Refreshes kept per stream: at one per second, the last few minutes. */
const HISTORY = 180;
/** Streams tracked at most: the oldest seen is forgotten first (a SCAN over many keys must not grow memory without bound). */
const MAX_STREAMS = 20_000;

interface Sample {
  at: number;
  report: StreamReport;
  history: number[];
  consumed: Record<string, number | null>;
}

/** Rates between successive refreshes of the same stream, kept in the process (no extra Redis call). */
export class RateHistory {
  private readonly samples = new Map<string, Sample>();

  previous(stream: string): StreamReport | undefined {
    return this.samples.get(stream)?.report;
  }

  add(report: StreamReport, at: number): StreamRates {
    const before = this.samples.get(report.stream);
    const seconds = before ? (at - before.at) / 1000 : 0;
    // Two refreshes in the same instant (two browsers): the last rates stand.
    if (before && seconds < 0.5)
      return { producedPerSec: before.history.at(-1) ?? null, consumedPerSec: before.consumed, producedHistory: before.history };
    const produced = before && seconds > 0 ? Math.max(0, report.entriesAdded - before.report.entriesAdded) / seconds : null;
    const consumedPerSec: Record<string, number | null> = {};
    for (const g of report.groups) {
      const was = before?.report.groups.find((x) => x.name === g.name);
      consumedPerSec[g.name] =
        was && was.entriesRead !== null && g.entriesRead !== null && seconds > 0
          ? Math.max(0, g.entriesRead - was.entriesRead) / seconds
          : null;
    }
    const history = [...(before?.history ?? []), ...(produced === null ? [] : [produced])].slice(-HISTORY);
    this.samples.delete(report.stream);
    this.samples.set(report.stream, { at, report, history, consumed: consumedPerSec });
    if (this.samples.size > MAX_STREAMS) this.samples.delete(this.samples.keys().next().value!);
    return { producedPerSec: produced, consumedPerSec, producedHistory: history };
  }
}
