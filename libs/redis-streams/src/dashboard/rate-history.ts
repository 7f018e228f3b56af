/** What rates are computed from: the stream's entries-added and each group's entries-read. */
export interface RateSource {
  stream: string;
  entriesAdded: number;
  groups: { name: string; entriesRead: number | null; lag: number | null; lastDeliveredId: string }[];
}

/**
 * Entries a group has read: the server's entries-read, or, where it has none (a group made at `$` or
 * at `0`), the entries added once its lag is 0 (it has read all of them). Otherwise unknown: a lag that
 * fell may be a trim or a group made again, not reading.
 */
export const readBy = (source: RateSource, g: RateSource['groups'][number]): number | null =>
  g.entriesRead ?? (g.lag === 0 ? source.entriesAdded : null);

/** Entries per second over the last refresh, and the recent history for a sparkline. */
export interface StreamRates {
  /** Entries added per second; null until two refreshes have been seen. */
  producedPerSec: number | null;
  /** Per group: entries read per second; null until two refreshes (or without `entries-read`). */
  consumedPerSec: Record<string, number | null>;
  /** Produced per second at each of the last refreshes, oldest first (at most HISTORY). */
  producedHistory: number[];
  /** Per group: consumed per second at each of the last refreshes, oldest first. */
  consumedHistory: Record<string, number[]>;
}

/** Refreshes kept per stream: at one per second, the last few minutes. */
const HISTORY = 180;
/** Streams tracked at most: the oldest seen is forgotten first (memory stays bounded whatever the key count). */
const MAX_STREAMS = 20_000;
/** Refreshes closer than this (two tabs at once) keep the last rates: a rate over a few ms is noise. */
const MIN_GAP_MS = 500;

interface Sample<T> {
  at: number;
  report: T;
  history: number[];
  consumed: Record<string, number | null>;
  consumedHistory: Record<string, number[]>;
}

/** Rates between successive refreshes of the same stream, kept in the process (no extra Redis call). */
export class RateHistory<T extends RateSource> {
  private readonly samples = new Map<string, Sample<T>>();

  previous(stream: string): T | undefined {
    return this.samples.get(stream)?.report;
  }

  add(report: T, at: number): StreamRates {
    const before = this.samples.get(report.stream);
    if (before && at - before.at < MIN_GAP_MS)
      return {
        producedPerSec: before.history.at(-1) ?? null,
        consumedPerSec: before.consumed,
        producedHistory: before.history,
        consumedHistory: before.consumedHistory,
      };
    const seconds = before ? (at - before.at) / 1000 : 0;
    const produced = before ? Math.max(0, report.entriesAdded - before.report.entriesAdded) / seconds : null;
    const consumed: Record<string, number | null> = {};
    for (const g of report.groups) {
      const was = before?.report.groups.find((x) => x.name === g.name);
      const then = was ? readBy(before!.report, was) : null;
      const now = readBy(report, g);
      // Nothing delivered since (its last-delivered id did not move): nothing consumed, whatever the counts say.
      if (was && was.lastDeliveredId === g.lastDeliveredId) consumed[g.name] = 0;
      else consumed[g.name] = then !== null && now !== null ? Math.max(0, now - then) / seconds : null;
    }
    const history = [...(before?.history ?? []), ...(produced === null ? [] : [produced])].slice(-HISTORY);
    const consumedHistory: Record<string, number[]> = {};
    for (const [name, rate] of Object.entries(consumed))
      consumedHistory[name] = [...(before?.consumedHistory[name] ?? []), ...(rate === null ? [] : [rate])].slice(-HISTORY);
    this.samples.delete(report.stream);
    this.samples.set(report.stream, { at, report, history, consumed, consumedHistory });
    if (this.samples.size > MAX_STREAMS) this.samples.delete(this.samples.keys().next().value!);
    return { producedPerSec: produced, consumedPerSec: consumed, producedHistory: history, consumedHistory };
  }
}
