import { attention } from '../cli/attention.js';
import { findStreams, inspectStreams, type StreamReport } from '../cli/inspect.js';
import { pendingEntryReport, readRetryView, type PendingEntryReport } from '../cli/pending-states.js';
import { connectedConsumers } from '../redis/connected-consumers.js';
import type { RedisConnection } from '../redis/connect.js';
import { isConnectionLoss, isErrorReply } from '../redis/redis-errors.js';
import { idTime, parseGroupRows, parsePendingRows } from '../redis/replies.js';
import { RateHistory, type StreamRates } from './rate-history.js';

/** One stream of the overview: inspect's report, with rates, the age of each group's oldest undelivered entry and what needs attention. */
export interface OverviewStream extends StreamReport, StreamRates {
  /** Per group: ms since the oldest entry not yet delivered to it was added (0: nothing undelivered; null: its id is no time). */
  lagMs: Record<string, number | null>;
}

export interface Overview {
  /** Redis' streams with a consumer group, this page of them (sorted by name). */
  streams: OverviewStream[];
  /** How many such streams there are, and which page this is. */
  total: number;
  page: number;
  pageSize: number;
  /** What needs attention first, across the page: `stream: why`. */
  attention: string[];
  at: number;
}

export interface PendingPage {
  stream: string;
  group: string;
  entries: (PendingEntryReport & { consumer: string; reclaimableInMs: number })[];
  /** Pass as `after` for the next page; null when this was the last. */
  next: string | null;
}

export interface EntryView {
  stream: string;
  id: string;
  /** Field/value pairs; a value over `maxChars` is cut (see `truncated`). */
  fields: [string, string][];
  truncated: boolean;
}

/** Ids before 2000 or in the future are not times (explicit ids such as `1-1`). */
const PLAUSIBLE_SINCE = Date.UTC(2000, 0, 1);

/** What the dashboard reads, each a bounded number of commands: SCAN with counts, ranged XPENDING / XRANGE, never KEYS. */
export class DashboardData {
  private readonly history = new RateHistory();

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: { match: string; minIdleMs: number; pageSize: number },
  ) {}

  async overview(page = 0): Promise<Overview> {
    const now = Date.now();
    const all = await findStreams(this.redis, this.options.match);
    const { pageSize } = this.options;
    const names = all.slice(page * pageSize, (page + 1) * pageSize);
    const reports = await inspectStreams(this.redis, names, undefined, now, true, 1);
    const streams: OverviewStream[] = [];
    for (const report of reports) {
      const previous = this.history.previous(report.stream);
      const rates = this.history.add(report, now);
      const lagMs: Record<string, number | null> = {};
      for (const g of report.groups) lagMs[g.name] = await this.undeliveredAge(report.stream, g.lastDeliveredId, now);
      streams.push({ ...report, ...rates, lagMs, attention: attention(report, this.options.minIdleMs, previous) });
    }
    const flagged = streams.flatMap((s) => s.attention!.map((why) => `${s.stream}: ${why}`));
    return { streams, total: all.length, page, pageSize, attention: flagged, at: now };
  }

  /** One stream: its full report (every consumer, up to 10 of each one's oldest pending entries). */
  async stream(stream: string): Promise<StreamReport | null> {
    const [report] = await inspectStreams(this.redis, [stream], undefined, Date.now(), true, 10);
    return report ?? null;
  }

  /** A page of the group's PEL, oldest first, after `after` (exclusive), each with its state and time until a peer may reclaim it. */
  async pending(stream: string, group: string, after: string | undefined, count: number): Promise<PendingPage> {
    const start = after === undefined ? '-' : `(${after}`;
    const raw = (await this.redis.xpending(stream, group, start, '+', count)) as unknown[];
    const rows = parsePendingRows(raw).map((row, i) => ({ ...row, consumer: String((raw[i] as unknown[])[1]) }));
    const view = await readRetryView(
      this.redis,
      stream,
      group,
      rows.map((r) => r.id),
    );
    const connected = await connectedConsumers(this.redis, group).catch((err: unknown) => {
      if (isErrorReply(err) || isConnectionLoss(err)) return null;
      throw err;
    });
    const entries = rows.map((row) => ({
      ...pendingEntryReport(row, view, connected === null ? null : connected.has(row.consumer)),
      consumer: row.consumer,
      reclaimableInMs: Math.max(0, this.options.minIdleMs - row.idleMs),
    }));
    return { stream, group, entries, next: rows.length === count ? rows[rows.length - 1]!.id : null };
  }

  /** One entry's fields, values cut at `maxChars` unless asked in full. */
  async entry(stream: string, id: string, maxChars: number): Promise<EntryView | null> {
    const found = await this.redis.xrange(stream, id, id);
    const first = found[0];
    if (!first) return null;
    const [, flat] = first;
    const fields: [string, string][] = [];
    let truncated = false;
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const value = flat[i + 1]!;
      if (value.length > maxChars) truncated = true;
      fields.push([flat[i]!, value.length > maxChars ? value.slice(0, maxChars) : value]);
    }
    return { stream, id, fields, truncated };
  }

  /** Whether `stream` is a stream with a group (actions and pages accept no other key). */
  async hasGroups(stream: string): Promise<boolean> {
    return parseGroupRows(await this.redis.xinfo('GROUPS', stream).catch(() => [])).length > 0;
  }

  /** Age of the first entry after the group's last-delivered id (one XRANGE of one entry). */
  private async undeliveredAge(stream: string, lastDeliveredId: string, now: number): Promise<number | null> {
    const next = await this.redis.xrange(stream, `(${lastDeliveredId}`, '+', 'COUNT', 1).catch(() => []);
    const first = next[0];
    if (!first) return 0;
    const born = idTime(first[0]);
    return born >= PLAUSIBLE_SINCE && born <= now ? now - born : null;
  }
}
