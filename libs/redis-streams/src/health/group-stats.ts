import type { GroupFigures } from '../redis/tools/group-lag.js';

/** One stream's figures for the group, as last read (`XINFO GROUPS` and a bounded count: see group-lag.ts). */
export interface StreamGroupStats {
  stream: string;
  /** Entries not yet delivered to the group; null when it cannot be told (more than LAG_COUNT_LIMIT and the server gives no figure above it). */
  lag: number | null;
  /** Entries delivered to the group and not yet acked, by any consumer. */
  pending: number;
  /** Letters in the stream's dead-letter stream; null without one (`deadLetterStream: false`) or when it cannot be read (another type, NOPERM). */
  deadLetters: number | null;
}

/** What one stream's reading gives: the group's figures (undefined: no such group) and its dead letters. */
export interface StreamReading {
  figures: GroupFigures | undefined;
  deadLetters: number | null;
}

export interface GroupStatsReading {
  stats: StreamGroupStats[];
  /** When Redis answered (ms since the epoch). */
  at: number;
}

/**
 * Lag and pending count of the group on each stream, read with `XINFO GROUPS` and a bounded
 * XRANGE (each stream's pair sent beside the others'), and its dead letters (XLEN), and kept: health checks and metric scrapes share one reading of at most a given
 * age, so their rate never becomes a per-entry cost, and concurrent callers share one read.
 */
export class GroupStats {
  private last: GroupStatsReading | undefined;
  private reading: Promise<GroupStatsReading> | undefined;

  constructor(
    private readonly streams: readonly string[],
    private readonly read: (stream: string) => Promise<StreamReading>,
  ) {}

  /** A reading no older than `maxAgeMs`: the kept one, or a fresh one. */
  get(maxAgeMs: number): Promise<GroupStatsReading> {
    if (this.last && Date.now() - this.last.at <= maxAgeMs) return Promise.resolve(this.last);
    return (this.reading ??= this.refresh().finally(() => (this.reading = undefined)));
  }

  /** The last reading, however old; undefined before the first. */
  latest(): GroupStatsReading | undefined {
    return this.last;
  }

  private async refresh(): Promise<GroupStatsReading> {
    const readings = await Promise.all(this.streams.map((stream) => this.read(stream)));
    // A group not there (lost with the server's data, until the loop re-creates it): lag unknown, nothing pending.
    const stats = this.streams.map((stream, i) => {
      const { figures, deadLetters } = readings[i]!;
      return { stream, lag: figures ? figures.lag : null, pending: figures?.pending ?? 0, deadLetters };
    });
    return (this.last = { stats, at: Date.now() });
  }
}
