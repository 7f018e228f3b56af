import { delayedReport, type GroupReport, type StreamReport } from '../ops/stream-reports.js';
import { pendingEntryReport, readRetryView, type PendingEntryReport } from '../ops/pending-states.js';
import { decodeDeadLetter, type DeadLetter } from '../codec/dead-letter-codec.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { DashboardCommands, MAX_PARTS } from '../redis/tools/dashboard-commands.js';
import type { GroupSummary, RangePreviewEntry, StreamSummary } from '../redis/tools/dashboard-replies.js';
import { isConnectionLoss, isErrorReply, isNoSuchKey, isWrongType } from '../redis/replies/redis-errors.js';
import { describeError } from '../describe-error.js';
import { describeFeatures } from '../redis/server-features.js';
import { escapeControl } from '../escape-control.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import { idAge } from '../redis/stream-ids.js';
import { deadLetterNamesOf, deadLetterScansOf, deadLetterSourcesOf } from '../key-names.js';
import { globToRegExp } from './key-scope.js';
import {
  asReport,
  groupedAttention,
  streamAttention,
  type AttentionItem,
  type DeadLetterFigure,
  type StreamFinding,
} from './overview-attention.js';
import { RateHistory, readBy } from './rate-history.js';
import { FigureHistory, type FigureSample, type HistorySeries } from './figure-history.js';
import type { ResolvedDashboardOptions } from './dashboard-options.js';
import { PauseCommands } from '../redis/intake/pause-commands.js';
import { isReadableSchedule, Schedules } from '../redis/upkeep/schedules.js';
import { EntryCommands } from '../redis/tools/entry-commands.js';
import type { DelayedPromotion, DelayedRow } from '../redis/tools/entry-replies.js';
import { readEntryState, type EntryState } from '../ops/entry-state.js';
import { RateStateCommands } from '../redis/tools/rate-state-commands.js';
import { rateLimitView, type RateLimitView } from './rate-limit-view.js';

export interface DashboardGroup extends Omit<GroupSummary, 'consumers'> {
  /** Ms since the oldest entry not yet delivered was added (0: none; null: its id is no time). */
  lagMs: number | null;
  consumedPerSec: number | null;
  /** Consumed per second at each of the last refreshes (the sparkline). */
  consumedHistory: number[];
  /** Its retry set: records not yet due and past due (ZCOUNT), or why it could not be read. */
  retries: RetryCounts;
  /** An ordered stream's owner for this group (docs/guide/ordering.md); null for any other (or unreadable). */
  ordering: GroupReport['ordering'];
  /** Its pattern paused for this group: since when, by whom (stream page only; null in the overview, or while it runs). */
  paused: GroupReport['paused'];
  /** Its consumers, each with whether a connection of this library's is open for it (null: CLIENT LIST refused). */
  consumers: (GroupSummary['consumers'][number] & { connected: boolean | null })[];
}

export type RetryCounts = { waiting: number; due: number } | { error: string };

export interface DashboardStream extends Omit<StreamSummary, 'groups'> {
  groups: DashboardGroup[];
  deadLetters: DeadLetterFigure[];
  producedPerSec: number | null;
  producedHistory: number[];
  attention: string[];
  /** On a cluster, the master that serves it (`host:port`); null on one node. */
  node: string | null;
  /** Delayed entries waiting in its schedule (docs/guide/flow-control.md), or why that is unknown. */
  delayed: StreamReport['delayed'];
  /** The stream page: its figures over the kept past (null: no history kept); absent in the overview's rows. */
  history?: HistorySeries | null;
}

export interface Overview {
  streams: DashboardStream[];
  /** Stream keys in scope (dead-letter streams apart), and this page of them, sorted by name. */
  total: number;
  page: number;
  pageSize: number;
  attention: string[];
  /** The same lines, each with the page it names (a link on the page). */
  attentionItems: AttentionItem[];
  /** The server and what it offers of the newer stream commands (`Redis 8.6.3: claim-on-read, …`), or why that is unknown. */
  server: string;
  at: number;
  /** This page's streams' figures over the kept past, summed (null: no history kept). */
  history: HistorySeries | null;
}

export interface PendingPage {
  stream: string;
  group: string;
  entries: (PendingEntryReport & { consumer: string; reclaimableInMs: number })[];
  next: string | null;
}

export interface EntryView {
  stream: string;
  id: string;
  fields: [string, string][];
  /** Each value's full size in bytes, beside the (maybe cut) value shown. */
  sizes: [number, number][];
  /** How many fields it has (a wide entry shows its first MAX_PARTS / 2). */
  fieldCount: number;
  truncated: boolean;
}

export type DeadLetterRow = Omit<DeadLetter, 'fields'> & { fieldsBytes: number; errorTruncated: boolean; stackTruncated: boolean };

/** A page of a stream's entries, newest first, each value cut (EntryView's shape). */
export interface EntriesPage {
  stream: string;
  entries: Omit<EntryView, 'stream'>[];
  /** The id to page on from (`before`); null once the oldest was reached. */
  next: string | null;
  /** Entries read for this page: a search reads at most `window` of them. */
  read: number;
  window: number;
}

/** Bytes of each value in a list of entries (the entry's own page shows 2,000, or all). */
const LIST_BYTES = 200;
/** Entries a search by a field's value reads per page, at most: its cost is this, never the stream's length. */
export const SEARCH_WINDOW = 1_000;

/** An entry as read with its values cut to `maxBytes`: pairs, each value's full size, whether anything was cut. */
function entryView(stream: string, found: RangePreviewEntry, maxBytes: number): EntryView {
  const fields: [string, string][] = [];
  const sizes: [number, number][] = [];
  for (let i = 0; i + 1 < found.fields.length; i += 2) {
    fields.push([found.fields[i]!, found.fields[i + 1]!]);
    sizes.push([found.sizes[i]!, found.sizes[i + 1]!]);
  }
  const parts = found.parts ?? found.sizes.length;
  const truncated = parts > found.fields.length || found.sizes.some((n) => n > maxBytes);
  return { stream, id: found.id, fields, sizes, fieldCount: parts / 2, truncated };
}

/** Streams the history's sampler reads at once: a round of 1,000 is 20 short bursts, not one long one. */
const SAMPLE_BATCH = 50;

/** A stream's figures for the charts' past: sums over its groups. */
function sampleOf(s: StreamSummary, dead: number): FigureSample {
  const lags = s.groups.map((g) => g.lag);
  const reads = s.groups.map((g) => readBy(s, g));
  return {
    lag: lags.includes(null) ? null : lags.reduce<number>((n, l) => n + l!, 0),
    pending: s.groups.reduce((n, g) => n + g.pending, 0),
    dead,
    added: s.entriesAdded,
    read: reads.includes(null) ? null : reads.reduce<number>((n, r) => n + r!, 0),
  };
}

/** The key list (one SCAN of every master) is read at most this often; pages and tabs share it. */
const KEYS_TTL_MS = 5_000;
/** Overview refreshes within this window share one read (several tabs, one Redis load). */
const SHARED_MS = 500;
/** A dead letter's reason is cut here in lists (the entry view has it whole, up to its own bound). */
const REASON_BYTES = 2_000;

/** What the dashboard reads: bounded commands only (dashboard-commands.ts), scoped to `match`. */
/** Schedules a stream page lists at most (the rest: `redis-streams schedules list`). */
const SCHEDULES_SHOWN = 100;

/** A stream's schedules as its page shows them. */
export interface SchedulesView {
  now: number;
  total: number;
  schedules: { id: string; timing: string; nextFireAt: number | null; lastFireAt: number | null; catchUp: 'once' | 'skip' | null }[];
}

/** A page of a stream's delayed entries, earliest due first, each value cut (the entry's own page shows it whole, up to its bound). */
export interface DelayedView {
  stream: string;
  /** How many wait in its schedule. */
  waiting: number;
  /** Redis' clock when read (ms): due times are on it. */
  now: number;
  entries: DelayedRow[];
  /** Where the next page starts; null: none. */
  next: { id: string; dueAt: number } | null;
}

/** Values of a delayed entry shown in a list, and on its own page. */
const DELAYED_LIST_BYTES = 200;
const DELAYED_ENTRY_BYTES = 2_000;

export class DashboardData {
  private readonly commands: DashboardCommands;
  private readonly reports: ReportCommands;
  private readonly entryCommands: EntryCommands;
  private readonly history = new RateHistory<ReturnType<typeof asReport>>();
  private readonly scope: RegExp;
  private keys: { at: number; work: string[]; dead: string[]; nodes: Map<string, string> | undefined } | undefined;
  private readonly shared = new Map<number, { at: number; overview: Promise<Overview> }>();
  private server: { at: number; line: Promise<string> } | undefined;
  /** The charts' past (figure-history.ts), and the timer that samples it while the dashboard runs. */
  private readonly figures: FigureHistory | null;
  private sampler: ReturnType<typeof setTimeout> | undefined;
  /**
   * The one stop signal: close() aborts it, and a walk of the key list or a sampling round under way starts no
   * command after it. (One ioredis already holds may still go out: it resends unanswered commands on a reconnect,
   * and a script on NOSCRIPT; read-only, at most one SCAN or one batch.)
   */
  private readonly stopped = new AbortController();
  private rateStates: RateStateCommands | undefined;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: Pick<ResolvedDashboardOptions, 'match' | 'minIdleMs' | 'pageSize'> & {
      history?: ResolvedDashboardOptions['history'];
    },
  ) {
    this.commands = new DashboardCommands(redis);
    this.reports = new ReportCommands(redis);
    this.entryCommands = new EntryCommands(redis);
    this.scope = globToRegExp(options.match);
    this.figures = options.history ? new FigureHistory(options.history) : null;
    if (this.figures) this.schedule(0);
  }

  /** Stops the sampler (the HTTP server closes, or the app): no timer is left behind. */
  close(): void {
    this.stopped.abort();
    clearTimeout(this.sampler);
  }

  /** What the history holds now: streams and bytes (null: none kept). */
  historyFootprint(): { streams: number; bytes: number } | null {
    return this.figures?.footprint ?? null;
  }

  private schedule(ms: number): void {
    if (this.stopped.signal.aborted) return;
    // unref: a dashboard whose owner never closes it must not hold its process open.
    this.sampler = setTimeout(() => void this.sampleRound(), ms);
    this.sampler.unref?.();
  }

  /**
   * One round of the sampler: the first `streams` streams in scope that no read of the overview sampled in
   * this interval, a batch at a time (one summary and the dead-letter lengths each). A failure leaves a gap.
   */
  private async sampleRound(): Promise<void> {
    const figures = this.figures!;
    const started = Date.now();
    try {
      // A connection its owner closed: nothing more to sample.
      if ((this.redis as { status?: string }).status === 'end') return this.close();
      // Its own read of the key list is not kept for the pages: an answer a page gets must come from Redis
      // within KEYS_TTL_MS of its request, not from a round of the sampler's before Redis went away.
      const { work } = await this.keyList({ sampler: true });
      const due = work.slice(0, figures.limits.streams).filter((name) => !figures.has(name, started));
      for (let i = 0; i < due.length && !this.stopped.signal.aborted; i += SAMPLE_BATCH)
        await Promise.all(due.slice(i, i + SAMPLE_BATCH).map((name) => this.sampleOne(name)));
    } catch {
      // Redis unreachable or refusing: this round's points are missing, the next round tries again.
    } finally {
      this.schedule(Math.max(0, figures.limits.intervalMs - (Date.now() - started)));
    }
  }

  private async sampleOne(stream: string): Promise<void> {
    const summary = await this.commands.summary(stream).catch(() => null);
    if (!summary || summary.groups.length === 0 || this.stopped.signal.aborted) return;
    const lengths = await Promise.all(deadLetterNamesOf(stream).map((key) => this.commands.deadLength(key).catch(() => null)));
    const dead = lengths.reduce<number>((n, l) => n + (typeof l === 'number' ? l : 0), 0);
    this.figures!.record(stream, Date.now(), sampleOf(summary, dead));
  }

  /** Whether the API may show `key`: a key `match` names, or the default-named dead-letter stream of one. */
  inScope(key: string): boolean {
    return this.scope.test(key);
  }

  /**
   * Whether `stream` is a stream with a consumer group (XINFO GROUPS: no entry comes back). A key that
   * is missing or no stream is not one; any other failure (NOPERM, no answer) is the request's.
   */
  async hasGroups(stream: string): Promise<boolean> {
    const groups = await this.reports.groups(stream).catch((err: unknown) => {
      if (isNoSuchKey(err) || isWrongType(err)) return [];
      throw err;
    });
    return groups.length > 0;
  }

  overview(page = 0): Promise<Overview> {
    const now = Date.now();
    const recent = this.shared.get(page);
    if (recent && now - recent.at < SHARED_MS) return recent.overview;
    const overview = this.readOverview(page, now);
    this.shared.set(page, { at: now, overview });
    overview.catch(() => this.shared.delete(page));
    return overview;
  }

  /** A page of `stream`'s repeatable schedules (the first SCHEDULES_SHOWN of them, in Redis' hash order), with Redis' now. */
  async schedules(stream: string): Promise<SchedulesView> {
    const page = await new Schedules(this.redis).page(stream, '0', SCHEDULES_SHOWN);
    return {
      now: page.now,
      total: page.total,
      schedules: page.schedules.slice(0, SCHEDULES_SHOWN).map((s) =>
        isReadableSchedule(s)
          ? {
              id: s.id,
              timing: s.every !== undefined ? `every ${s.every} ms` : `cron ${s.cron} ${s.tz ?? 'UTC'}`,
              nextFireAt: s.nextFireAt ?? null,
              lastFireAt: s.lastFireAt ?? null,
              catchUp: s.catchUp,
            }
          : { id: s.id, timing: 'unreadable record', nextFireAt: null, lastFireAt: null, catchUp: null },
      ),
    };
  }

  /** Removes schedule `id` of `stream` (and its fire if one waits): true if it existed. */
  removeSchedule(stream: string, id: string): Promise<boolean> {
    return new Schedules(this.redis).remove(stream, id);
  }

  /** Pauses (or resumes) `stream` (it alone: a partitioned pattern's partitions one by one) for `group`; true if that changed anything, 'no such group' when the stream has none of that name. */
  async setPaused(stream: string, group: string, pause: boolean, by: string): Promise<boolean | 'no such group'> {
    // A flag for a group the stream does not have would pause nothing visible, and a group of that name created later.
    if (pause && !(await this.reports.groups(stream)).some((g) => g.name === group)) return 'no such group';
    const pauses = new PauseCommands(this.redis);
    return pause ? pauses.pause(stream, group, by) : pauses.resume(stream, group);
  }

  /** Dead-letter streams in scope, with their lengths (one page of them). */
  async deadLetterStreams(page: number): Promise<{ streams: DeadLetterFigure[]; total: number; page: number; pageSize: number }> {
    const { dead } = await this.keyList();
    const { pageSize } = this.options;
    const names = dead.slice(page * pageSize, (page + 1) * pageSize);
    const lengths = await Promise.all(names.map((key) => this.commands.deadLength(key)));
    const streams = names.map((stream, i) => ({ stream, length: typeof lengths[i] === 'number' ? lengths[i] : null }));
    return { streams, total: dead.length, page, pageSize };
  }

  /** One stream: its summary with rates left out, and per group the retry set's counts. */
  /** One stream: as in the overview, rates left out. */
  async stream(stream: string): Promise<DashboardStream | null> {
    const summary = await this.commands.summary(stream);
    if (!summary) return null;
    // Rates too: the stream page charts them (a refresh of the overview within 0.5 s shares its sample).
    const now = Date.now();
    const [full] = await this.decorate([summary], now, true, false);
    return { ...full!, history: this.figures?.series([stream], now) ?? null };
  }

  /** `stream`'s rate limit for `group`, as its workers published it, and its window, block and held keys now; null: none. */
  rateLimit(stream: string, group: string): Promise<RateLimitView | null> {
    this.rateStates ??= new RateStateCommands(this.redis, (this.redis as { isCluster?: boolean }).isCluster === true);
    return rateLimitView(this.rateStates, stream, group);
  }

  async pending(stream: string, group: string, after: string | undefined, count: number): Promise<PendingPage> {
    const rows = await this.reports.pendingPage(stream, group, after === undefined ? '-' : `(${after}`, count);
    const view = await readRetryView(
      this.reports,
      stream,
      group,
      rows.map((r) => r.id),
    );
    const connected = await this.connected();
    const entries = rows.map((row) => ({
      ...pendingEntryReport(row, view, connected === null ? null : (connected.get(group)?.has(row.consumer) ?? false)),
      consumer: row.consumer,
      reclaimableInMs: Math.max(0, this.options.minIdleMs - row.idleMs),
    }));
    return { stream, group, entries, next: rows.length === count ? rows[rows.length - 1]!.id : null };
  }

  /** One entry, each value cut to `maxBytes` inside Redis. */
  async entry(stream: string, id: string, maxBytes: number): Promise<EntryView | null> {
    const [found] = await this.commands.rangePreview(stream, id, id, 1, maxBytes);
    return found ? entryView(stream, found, maxBytes) : null;
  }

  /** Where entry `id` of `stream` stands in each group, its letters, as far as Redis tells (ops/entry-state.ts). */
  entryState(stream: string, id: string): Promise<EntryState> {
    return readEntryState({ reports: this.reports, entries: this.entryCommands, dashboard: this.commands }, stream, id, REASON_BYTES);
  }

  /** A page of `stream`'s delayed entries, earliest due first, after `after`. */
  async delayed(stream: string, after: { id: string; dueAt: number } | undefined, count: number): Promise<DelayedView> {
    const page = await this.entryCommands.delayedPage(stream, after, count, DELAYED_LIST_BYTES, 20);
    return { stream, waiting: page.waiting, now: page.now, entries: page.rows, next: page.next };
  }

  /** One delayed entry of `stream`, each value cut to 2,000 bytes; null when it no longer waits. */
  async delayedEntry(stream: string, id: string): Promise<(DelayedRow & { stream: string; now: number }) | null> {
    const page = await this.entryCommands.delayedEntry(stream, id, DELAYED_ENTRY_BYTES, MAX_PARTS);
    const [row] = page.rows;
    return row ? { ...row, stream, now: page.now } : null;
  }

  /** Cancels delayed entry `id` of `stream`: true if it was waiting. */
  cancelDelayed(stream: string, id: string): Promise<boolean> {
    return this.entryCommands.cancelDelayed(stream, id);
  }

  /** Moves delayed entry `id` of `stream` in now (entry-commands.ts); 'gone' when it no longer waited. */
  promoteDelayed(stream: string, id: string): Promise<DelayedPromotion> {
    return this.entryCommands.promoteDelayed(stream, id);
  }

  /**
   * A page of `stream`'s entries, newest first, from `before` (exclusive) or `to`, back to `from`;
   * with `field`, those whose field holds `value`, among at most SEARCH_WINDOW read.
   */
  async entries(
    stream: string,
    q: { before?: string; from?: string; to?: string; field?: string; value?: string; count: number },
  ): Promise<EntriesPage> {
    const end = q.before !== undefined ? `(${q.before}` : (q.to ?? '+');
    const page = await this.commands.browse(stream, {
      end,
      start: q.from ?? '-',
      count: q.count,
      maxBytes: LIST_BYTES,
      window: SEARCH_WINDOW,
      ...(q.field ? { field: q.field, value: q.value ?? '' } : {}),
    });
    const entries = page.entries.map((found) => {
      const { stream: _s, ...view } = entryView(stream, found, LIST_BYTES);
      return view;
    });
    return { stream, entries, next: page.stoppedAt, read: page.read, window: SEARCH_WINDOW };
  }

  /** A page of dead letters, their reasons cut and their original fields left in Redis (their size only). */
  async deadLetters(key: string, after: string | undefined, count: number): Promise<DeadLetterRow[]> {
    const rows = await this.commands.rangePreview(key, after === undefined ? '-' : `(${after}`, '+', count, REASON_BYTES);
    return rows.map((row) => {
      const { fields: _fields, ...letter } = decodeDeadLetter(row.id, row.fields);
      // A field name sits at an even index: a value that happens to read "fields" is not one.
      const at = (name: string) => {
        for (let i = 0; i + 1 < row.fields.length; i += 2) if (row.fields[i] === name) return row.sizes[i + 1] ?? 0;
        return 0;
      };
      return {
        ...letter,
        fieldsBytes: at('fields'),
        errorTruncated: at('error') > REASON_BYTES,
        stackTruncated: at('stack') > REASON_BYTES,
      };
    });
  }

  /** Ids of a dead-letter stream's oldest letters, at most `count` (nothing else is read). */
  async deadLetterIds(key: string, count: number): Promise<string[]> {
    return (await this.commands.rangePreview(key, '-', '+', count, 0)).map((r) => r.id);
  }

  private async readOverview(page: number, now: number): Promise<Overview> {
    const { work } = await this.keyList();
    const { pageSize } = this.options;
    const names = work.slice(page * pageSize, (page + 1) * pageSize);
    // A stream Redis refuses to read (NOPERM, a script error on odd data) is reported, never the whole page's failure.
    const unreadable: AttentionItem[] = [];
    const read = await Promise.all(
      names.map((key) =>
        this.commands.summary(key).catch((err: unknown) => {
          if (!isErrorReply(err)) throw err;
          unreadable.push({ text: `${key}: could not be read (${describeError(err)})`, page: 'stream', key });
          return null;
        }),
      ),
    );
    const summaries = read.filter((s): s is StreamSummary => s !== null && s.groups.length > 0);
    const found = new Map<string, StreamFinding[]>();
    const streams = await this.decorate(summaries, now, true, true, found);
    // A partitioned pattern's partitions share their lines (one dead worker: one line, not one per partition).
    const attentionItems = [
      ...unreadable,
      ...groupedAttention(
        streams.map((s) => ({ stream: s.stream, findings: found.get(s.stream) ?? [], deadLetters: s.deadLetters })),
        this.options.minIdleMs,
      ),
    ];
    const attention = attentionItems.map((a) => a.text);
    const history = this.figures?.series(names, now) ?? null;
    return { streams, total: work.length, page, pageSize, attention, attentionItems, server: await this.serverLine(now), at: now, history };
  }

  /** Read at most every KEYS_TTL_MS, as the key list is: a failover may land on another server. */
  private serverLine(now: number): Promise<string> {
    if (!this.server || now - this.server.at >= KEYS_TTL_MS) {
      const line = this.commands.serverFeatures().then(describeFeatures, (err: unknown) => `unknown (${describeError(err)})`);
      this.server = { at: now, line };
    }
    return this.server.line;
  }

  /** Summaries with their dead letters, connections, lag ages, rates (when `rates`) and attention. */
  private async decorate(
    summaries: StreamSummary[],
    now: number,
    rates: boolean,
    overview: boolean,
    found?: Map<string, StreamFinding[]>,
  ): Promise<DashboardStream[]> {
    const connected = await this.connected();
    return Promise.all(
      summaries.map(async (s) => {
        const names = deadLetterNamesOf(s.stream);
        // A dead-letter key the dashboard's user may not read (NOPERM) is left out, and said.
        const refused: string[] = [];
        const lengths = await Promise.all(
          names.map((key) =>
            this.commands.deadLength(key).catch((err: unknown) => {
              if (!isErrorReply(err)) throw err;
              refused.push(`"${escapeControl(key)}" could not be read (${describeError(err)})`);
              return null;
            }),
          ),
        );
        const dead = names.flatMap((stream, i) => {
          const n = lengths[i];
          return n === null || n === undefined ? [] : [{ stream, length: n === 'wrong type' ? null : n }];
        });
        const retries = new Map<string, RetryCounts>();
        const ordering = new Map<string, GroupReport['ordering']>();
        const paused = new Map<string, GroupReport['paused']>();
        for (const g of s.groups) {
          const view = await readRetryView(this.reports, s.stream, g.name, []);
          retries.set(g.name, view.known ? { waiting: view.waitingCount, due: view.dueCount } : { error: view.error });
          ordering.set(g.name, await this.reports.ownership(s.stream, g.name).catch(() => null));
          // The stream page only: the overview's refresh cost stays as it was.
          if (!overview) paused.set(g.name, await this.reports.paused(s.stream, g.name).catch(() => null));
        }
        const delayed = await delayedReport(this.reports, s.stream);
        const report = asReport(s, connected, dead, retries, delayed);
        // What the page read goes into the charts' past too (the sampler then skips it this interval).
        this.figures?.record(
          s.stream,
          now,
          sampleOf(
            s,
            dead.reduce((n, d) => n + (d.length ?? 0), 0),
          ),
          { admit: false },
        );
        const previous = this.history.previous(s.stream);
        const r = rates
          ? this.history.add(report, now)
          : { producedPerSec: null, consumedPerSec: {}, producedHistory: [], consumedHistory: {} };
        const groups = s.groups.map((g) => ({
          ...g,
          // Ms since the oldest entry not yet delivered was added (0: none; null: its id is no time).
          lagMs: g.firstUndeliveredId === null ? 0 : idAge(g.firstUndeliveredId, now),
          consumedPerSec: r.consumedPerSec[g.name] ?? null,
          consumedHistory: r.consumedHistory[g.name] ?? [],
          retries: retries.get(g.name)!,
          ordering: ordering.get(g.name) ?? null,
          paused: paused.get(g.name) ?? null,
          consumers: g.consumers.map((c) => ({
            ...c,
            connected: connected === null ? null : (connected.get(g.name)?.has(c.name) ?? false),
          })),
        }));
        const findings: StreamFinding[] = [
          ...refused.map((text) => ({ text, kind: 'refused' as const })),
          ...streamAttention(report, this.options.minIdleMs, previous),
        ];
        found?.set(s.stream, findings);
        const attention = findings.map((f) => f.text);
        const node = this.keys?.nodes?.get(s.stream) ?? null;
        return {
          ...s,
          groups,
          deadLetters: dead,
          producedPerSec: r.producedPerSec,
          producedHistory: r.producedHistory,
          attention,
          node,
          delayed,
        };
      }),
    );
  }

  private connected(): Promise<Map<string, Set<string>> | null> {
    return this.commands.connectedByGroup().catch((err: unknown) => {
      // No +client|list, or a node's connection just closed by a failover: connections unknown.
      if (isErrorReply(err) || isConnectionLoss(err)) return null;
      throw err;
    });
  }

  private async keyList({ sampler = false } = {}): Promise<{ work: string[]; dead: string[]; nodes: Map<string, string> | undefined }> {
    const now = Date.now();
    if (this.keys && now - this.keys.at < KEYS_TTL_MS) return this.keys;
    // The dead-letter streams of a cluster's untagged names do not match the pattern itself: SCANs of their own.
    const { match } = this.options;
    // The sampler's walk ends at close; a page's request under way is answered still.
    const signal = sampler ? this.stopped.signal : undefined;
    const found = new Map(await this.commands.streamKeys(match, signal));
    for (const scan of deadLetterScansOf(match)) for (const [key, at] of await this.commands.streamKeys(scan, signal)) found.set(key, at);
    const all = [...found.keys()].sort();
    const isDead = (key: string) => deadLetterSourcesOf(key).length > 0;
    const dead = all.filter((key) => deadLetterSourcesOf(key).some((source) => this.inScope(source)));
    const work = all.filter((key) => !isDead(key) && this.inScope(key));
    // Which master serves which stream: shown on a cluster only (one node tells nothing).
    const nodes = new Set(found.values()).size > 1 || (this.redis as { isCluster?: boolean }).isCluster === true ? found : undefined;
    const keys = { at: now, work, dead, nodes };
    if (!sampler) this.keys = keys;
    return keys;
  }
}
