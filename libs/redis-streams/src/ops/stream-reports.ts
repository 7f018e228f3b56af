import { DeadLetters } from '../dlq/dead-letters.js';
import { escapeControl as e } from '../escape-control.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { isConnectionLoss, isErrorReply, isNoSuchKey, isWrongType } from '../redis/replies/redis-errors.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import type { DurabilityReport, PauseState } from '../redis/replies/replies.js';
import { parseIdempotency, type IdempotencyFigures } from '../redis/replies/info-replies.js';
import { describeFeatures, detectServerFeatures } from '../redis/server-features.js';
import { describeError } from '../describe-error.js';
import { idAge } from '../redis/stream-ids.js';
import { countStates, pendingEntryReport, readRetryView, type PendingEntryReport, type PendingState } from './pending-states.js';

export interface ConsumerReport {
  name: string;
  pending: number;
  /** XINFO's `idle`: on Redis 7.0 ms since its last delivery (empty reads do not reset it); on Valkey 8 / Redis 7.2+ since its last read. */
  idleMs: number;
  /** XINFO's `inactive` (Valkey 8 / Redis 7.2+): ms since its last delivery, -1 never; null where the server has no such figure. */
  inactiveMs: number | null;
  /** Whether a connection of this transport's named for it is open (see connected-consumers.ts); null when CLIENT LIST is refused. */
  connected: boolean | null;
  /** Age of its oldest pending entry (from the entry id's time); null when it owns none. */
  oldestPendingAgeMs: number | null;
  /** That entry's id and idle time (since its last delivery or lease renewal); null when it owns none. */
  oldestPendingId: string | null;
  oldestPendingIdleMs: number | null;
  /** Its oldest pending entries (at most `--entries`), each with what it waits for (pending-states.ts). */
  pendingEntries: PendingEntryReport[];
  /** How many of those are in each state. */
  pendingStates: Partial<Record<PendingState, number>>;
}

export interface GroupReport {
  name: string;
  pending: number;
  lastDeliveredId: string;
  /** Entries not yet delivered to the group, as health() counts them (group-lag.ts); null when it cannot be told. */
  lag: number | null;
  entriesRead: number | null;
  consumers: ConsumerReport[];
  /** Records of the retry set not yet due / past due (ZCOUNT); null when it could not be read. */
  retryWaiting: number | null;
  retryDue: number | null;
  /** Why the retry set could not be read (e.g. NOPERM); null when it was. */
  retryStateError: string | null;
  /** An ordered stream (docs/guide/ordering.md): who owns it for this group (null: nobody now), epoch, lease left, members; null for any other. */
  ordering: {
    consumer: string | null;
    epoch: number | null;
    leaseMs: number | null;
    members: number;
    /** Its owner's durable acks (`durableAcks`), as the owner last said; null without them. */
    durability: DurabilityReport | null;
  } | null;
  /** Its pattern is paused for this group (docs/guide/flow-control.md): since when and by whom; null while it runs (or unreadable). */
  paused: PauseState | null;
}

export interface StreamReport {
  stream: string;
  length: number;
  lastGeneratedId: string;
  entriesAdded: number;
  /** Idempotent produce (Redis 8.6): the stream's window and counters; null where the server has none. */
  idempotency: IdempotencyFigures | null;
  groups: GroupReport[];
  /** Dead-letter streams of this stream under the default names, with their length. */
  deadLetters: { stream: string; length: number }[];
  /** Keys under those names that hold another type: dead-lettering there fails until the key is renamed or deleted. */
  deadLetterKeysNotStreams: string[];
  /** Delayed entries waiting in the stream's schedule (docs/guide/flow-control.md), the ms until the next is due (negative: past due, null: none waits); or why it could not be read. */
  /** `orphaned`: values in its entries hash that no schedule names (the schedule deleted, ids removed by hand); absent when none, or not readable. */
  delayed: { waiting: number; nextDueInMs: number | null; orphaned?: number } | { error: string };
  /** What needs an operator (attention.ts), filled in by the CLI. */
  attention?: string[];
}

/**
 * What an operator asks first about each stream: how long, how far behind, who holds what, what
 * died. `skipMissing`: a stream deleted since it was found is left out rather than an error.
 * `entriesShown`: pending entries listed per consumer, oldest first.
 */
export async function inspectStreams(
  redis: RedisConnection,
  streams: readonly string[],
  group?: string,
  now = Date.now(),
  skipMissing = false,
  entriesShown = 10,
): Promise<StreamReport[]> {
  const dlq = new DeadLetters(redis);
  const commands = new ReportCommands(redis);
  const reports: StreamReport[] = [];
  for (const stream of streams) {
    // Every failure names its stream. One gone (or no longer a stream) since the SCAN found it is left out.
    const report = await streamReport(commands, dlq, stream, group, now, entriesShown).catch((err: unknown) => {
      if (isNoSuchKey(err)) {
        if (skipMissing) return null;
        throw new Error(`no stream "${stream}"`, { cause: err });
      }
      if (isWrongType(err) && skipMissing) return null;
      throw new Error(`"${stream}": ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    if (report) reports.push(report);
  }
  return reports;
}

/** One stream's report: its length and ids, its groups (or `group` alone) with their consumers, its dead letters. */
async function streamReport(
  commands: ReportCommands,
  dlq: DeadLetters,
  stream: string,
  group: string | undefined,
  now: number,
  entriesShown: number,
): Promise<StreamReport> {
  const info = await commands.streamInfo(stream);
  const groups: GroupReport[] = [];
  for (const g of await commands.groups(stream)) {
    const name = g.name;
    if (group !== undefined && name !== group) continue;
    const { consumers, retries } = await consumerReports(commands, stream, name, now, entriesShown);
    const { lag } = await commands.groupFigures(stream, g);
    const ordering = await commands.ownership(stream, name).catch(() => null);
    const paused = await commands.paused(stream, name).catch(() => null);
    groups.push({
      name,
      pending: g.pending,
      lastDeliveredId: g.lastDeliveredId,
      lag,
      entriesRead: g.entriesRead,
      consumers,
      ...retries,
      ordering,
      paused,
    });
  }
  const { deadLetters, deadLetterKeysNotStreams } = await deadLetterFigures(dlq, stream);
  const delayed = await delayedReport(commands, stream);
  return {
    stream,
    length: Number(info.length),
    lastGeneratedId: String(info['last-generated-id']),
    entriesAdded: Number(info['entries-added'] ?? info.length),
    idempotency: parseIdempotency(info),
    groups,
    deadLetters,
    deadLetterKeysNotStreams,
    delayed,
  };
}

/** What waits in the stream's schedule of delayed entries; a refusal (NOPERM) is said, not thrown. */
export function delayedReport(commands: ReportCommands, stream: string): Promise<StreamReport['delayed']> {
  return commands.delayed(stream).then(
    (d) => ({ waiting: d.waiting, nextDueInMs: d.nextDueInMs ?? null, ...(d.orphaned ? { orphaned: d.orphaned } : {}) }),
    (err: unknown) => {
      if (isErrorReply(err)) return { error: describeError(err) };
      throw err;
    },
  );
}

/**
 * The stream's dead-letter keys that exist: their length, or, for a key of another type, its name. A side
 * key of the wrong type is the operator's to fix; it never hides the stream it belongs to.
 */
async function deadLetterFigures(
  dlq: DeadLetters,
  stream: string,
): Promise<Pick<StreamReport, 'deadLetters' | 'deadLetterKeysNotStreams'>> {
  const deadLetters: StreamReport['deadLetters'] = [];
  const deadLetterKeysNotStreams: string[] = [];
  for (const key of await dlq.find(stream)) {
    const length = await dlq.count(key).catch((err: unknown) => {
      if (isWrongType(err)) return null;
      throw new Error(`dead-letter key "${e(key)}": ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    if (length === null) deadLetterKeysNotStreams.push(key);
    else deadLetters.push({ stream: key, length });
  }
  return { deadLetters, deadLetterKeysNotStreams };
}

/** Per consumer of `group`: pending, idle figures, connection, its oldest pending entries and what each waits for. */
async function consumerReports(
  commands: ReportCommands,
  stream: string,
  group: string,
  now: number,
  entriesShown: number,
): Promise<{ consumers: ConsumerReport[]; retries: Pick<GroupReport, 'retryWaiting' | 'retryDue' | 'retryStateError'> }> {
  const connected = await commands.connectedConsumers(group).catch((err: unknown) => {
    // No +client|list, or a cluster node's connection closed by a failover just now: connections unknown.
    if (isErrorReply(err) || isConnectionLoss(err)) return null;
    throw err;
  });
  const rows = [];
  for (const c of await commands.consumers(stream, group))
    rows.push({ c, pending: c.pending > 0 ? await commands.pendingOf(stream, group, c.name, entriesShown) : [] });
  const view = await readRetryView(
    commands,
    stream,
    group,
    rows.flatMap((r) => r.pending.map((p) => p.id)),
  );
  const consumers = rows.map(({ c, pending }): ConsumerReport => {
    // The oldest entry's id time is its age when it is a time; otherwise its idle time since the last delivery.
    const oldest = pending[0];
    const isConnected = connected && connected.has(c.name);
    const pendingEntries = pending.map((p) => pendingEntryReport(p, view, isConnected));
    return {
      ...c,
      connected: isConnected,
      oldestPendingAgeMs: oldest ? (idAge(oldest.id, now) ?? oldest.idleMs) : null,
      oldestPendingId: oldest?.id ?? null,
      oldestPendingIdleMs: oldest?.idleMs ?? null,
      pendingEntries,
      pendingStates: countStates(pendingEntries),
    };
  });
  const retries = view.known
    ? { retryWaiting: view.waitingCount, retryDue: view.dueCount, retryStateError: null }
    : { retryWaiting: null, retryDue: null, retryStateError: view.error };
  return { consumers, retries };
}

/** The server and what it offers of the newer stream commands (`Redis 8.6.3: claim-on-read, …`); why not, when it cannot be told. */
export async function serverLine(redis: RedisConnection): Promise<string> {
  return detectServerFeatures(redis).then(describeFeatures, (err: unknown) => `unknown (${describeError(err)})`);
}

/** Stream keys matching `pattern` that have at least one consumer group (work streams, not dead-letter or reply streams), on every master. */
export async function findStreams(redis: RedisConnection, pattern: string): Promise<string[]> {
  const commands = new ReportCommands(redis);
  const keys = await commands.streamKeys(pattern);
  const withGroups: string[] = [];
  for (const key of [...keys.keys()].sort()) {
    // Deleted or replaced since the SCAN saw it: not a stream any more. Any other failure (NOPERM, no answer) is one:
    // a stream left out would read as a stream that has no group.
    const groups = await commands.groups(key).catch((err: unknown) => {
      if (isNoSuchKey(err) || isWrongType(err)) return []; // no longer a stream
      throw new Error(`"${e(key)}": ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    if (groups.length > 0) withGroups.push(key);
  }
  return withGroups;
}
