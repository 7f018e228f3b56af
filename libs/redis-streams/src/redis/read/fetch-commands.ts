import type { RedisConnection } from '../connection/connect.js';
import type { ScriptedConnection } from '../connection/scripted-connection.js';
import {
  parseAutoClaimReply,
  parsePendingRow,
  parsePendingRows,
  parseReadReply,
  parseReclaimRoundReply,
  type AutoClaimResult,
  type PendingRow,
} from '../replies/replies.js';
import { compareIds } from '../stream-ids.js';
import { retryKeyOf } from '../../key-names.js';
import type { StreamEntry } from '../../stream-entry.js';

/** A `>` read's reply: every entry delivered once more (see parseReadReply). */
const parseNewReadReply = (reply: unknown): StreamEntry[] => parseReadReply(reply, 1);

/** One stream's XAUTOCLAIM of a reclaim round: from `cursor`. */
export interface ClaimRequest {
  readonly stream: string;
  readonly cursor: string;
}

/** One self-drain read: the entries with their delivery counts, and whether any retry set exists. */
export interface DrainRead {
  /** Each with its delivery count (this read included); 0: no longer pending under this consumer. */
  readonly entries: StreamEntry[];
  /** False: no entry of these streams waits for a retry, nothing to adopt. */
  readonly retriesWaiting: boolean;
}

/**
 * The commands that fetch entries for a consumer (reads, reclaims, their delivery counts), and
 * where their replies are parsed. Several streams' commands go in one pipeline: a reader's
 * streams share one slot on a cluster (see plan.ts), so one pipeline is one round trip there too.
 */
export class FetchCommands {
  constructor(
    private readonly conn: ScriptedConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {}

  /**
   * XREADGROUP over several streams at once. `ids[i]` is the start id for `streams[i]`:
   * `'>'` for new entries, an explicit id for this consumer's own pending ones.
   * `blockMs` undefined: no BLOCK. Runs on `conn` (the private lane for blocking reads).
   * `claimMinIdleMs` (Redis 8.4+, `>` reads): entries of the group idle that long come first
   * (most idle first), claimed by `consumer`, each with its exact delivery count (see parseEntry).
   */
  readGroup(
    conn: RedisConnection,
    consumer: string,
    streams: readonly string[],
    ids: readonly string[],
    count: number,
    blockMs?: number,
    claimMinIdleMs?: number,
  ): Promise<StreamEntry[]> {
    // Once per read (the drain's hot path): one argument list, no async frame; the reply parsed where it lands.
    const args: (string | number)[] = ['GROUP', this.group, consumer, 'COUNT', count];
    if (blockMs !== undefined) args.push('BLOCK', blockMs);
    if (claimMinIdleMs !== undefined) args.push('CLAIM', claimMinIdleMs);
    args.push('STREAMS');
    for (const stream of streams) args.push(stream);
    for (const id of ids) args.push(id);
    return conn.call('XREADGROUP', args).then(parseNewReadReply);
  }

  /**
   * Self-drain's read (`XREADGROUP … STREAMS k… <after>…`) with, in the same round trip, the
   * delivery counts of what it returns (`XPENDING k g (<after> + COUNT consumer`: the same
   * entries of the same PEL, counted after this read; 0 for one no longer pending under
   * `consumer`) and whether any retry set exists.
   */
  async drainRead(consumer: string, streams: readonly string[], after: readonly string[], count: number): Promise<DrainRead> {
    const pipeline = this.conn.pipeline();
    pipeline.call('XREADGROUP', 'GROUP', this.group, consumer, 'COUNT', count, 'STREAMS', ...streams, ...after);
    streams.forEach((s, i) => pipeline.xpending(s, this.group, after[i] === '0' ? '-' : `(${after[i]}`, '+', count, consumer));
    pipeline.exists(...streams.map((s) => retryKeyOf(s, this.group, this.onCluster)));
    const replies = replyValues((await pipeline.exec()) ?? [], streams.length + 2, 'XREADGROUP');
    const entries = parseReadReply(replies[0], 0);
    streams.forEach((s, i) => countInto(entries, s, parsePendingRows(replies[i + 1])));
    return { entries, retriesWaiting: Number(replies[streams.length + 1]) > 0 };
  }

  /**
   * XAUTOCLAIM of each request's stream in turn (entries of the group idle for at least
   * `minIdleMs` become `consumer`'s), `count` entries at most in all; several streams in one
   * script (RECLAIM_ROUND_SCRIPT), whose unreached streams come back undefined. An EXISTS of
   * their retry sets goes in the same pipeline: one round trip for any number of streams.
   * `retriesWaiting` false: none of them holds an entry waiting for a retry. `failure`: a
   * stream's XAUTOCLAIM failed, after what the streams before it claimed (to settle, then throw).
   */
  async autoClaim(
    consumer: string,
    minIdleMs: number,
    requests: readonly ClaimRequest[],
    count: number,
  ): Promise<{ results: (AutoClaimResult | undefined)[]; retriesWaiting: boolean; failure?: Error }> {
    const pipeline = this.conn.pipeline() as ReturnType<ScriptedConnection['pipeline']> & Pick<ScriptedConnection, 'streamsReclaimRound'>;
    const streams = requests.map((r) => r.stream);
    if (requests.length === 1) pipeline.xautoclaim(streams[0]!, this.group, consumer, minIdleMs, requests[0]!.cursor, 'COUNT', count);
    else
      void pipeline.streamsReclaimRound(
        streams.length,
        ...streams,
        this.group,
        consumer,
        minIdleMs,
        count,
        ...requests.map((r) => r.cursor),
      );
    pipeline.exists(...streams.map((s) => retryKeyOf(s, this.group, this.onCluster)));
    const [claims, exists] = replyValues((await pipeline.exec()) ?? [], 2, 'XAUTOCLAIM');
    const retriesWaiting = Number(exists) > 0;
    if (requests.length === 1) return { results: [parseAutoClaimReply(streams[0]!, claims)], retriesWaiting };
    const { results, error } = parseReclaimRoundReply(streams, claims);
    // Redis' own words (NOGROUP …): the loop's retry decisions read their prefix.
    return error === undefined ? { results, retriesWaiting } : { results, retriesWaiting, failure: new Error(error) };
  }

  /**
   * Sets the delivery count of entries `consumer` just claimed: per stream one `XPENDING k g
   * <first> <last> <n> consumer` (its pending entries in that id range, `alsoHeld` more than it
   * claimed at most), pipelined. 0 where the range did not list one (see withDeliveryCounts).
   */
  async countClaimed(consumer: string, entries: readonly StreamEntry[], alsoHeld: (stream: string) => number): Promise<void> {
    const byStream = new Map<string, StreamEntry[]>();
    for (const e of entries) {
      e.deliveryCount = 0;
      (byStream.get(e.stream) ?? byStream.set(e.stream, []).get(e.stream)!).push(e);
    }
    const pipeline = this.conn.pipeline();
    for (const [stream, mine] of byStream) {
      pipeline.xpending(stream, this.group, mine[0]!.id, mine.at(-1)!.id, mine.length + alsoHeld(stream), consumer);
    }
    const replies = replyValues((await pipeline.exec()) ?? [], byStream.size, 'XPENDING');
    [...byStream].forEach(([stream, mine], i) => countInto(mine, stream, parsePendingRows(replies[i])));
  }

  /**
   * Owner and delivery count of each entry, exactly: one `XPENDING key group id id 1` per
   * entry, pipelined in one round trip. Undefined for an entry no longer pending (acked).
   */
  async pendingRows(entries: readonly StreamEntry[]): Promise<(PendingRow | undefined)[]> {
    if (entries.length === 0) return [];
    const pipeline = this.conn.pipeline();
    for (const e of entries) pipeline.xpending(e.stream, this.group, e.id, e.id, 1);
    const replies = replyValues((await pipeline.exec()) ?? [], entries.length, 'XPENDING');
    return entries.map((e, i) => parsePendingRow(e.id, replies[i]));
  }
}

/** Both lists are one stream's part of the same PEL in id order: walked side by side, no lookup per entry. */
function countInto(entries: StreamEntry[], stream: string, rows: { id: string; deliveries: number }[]): void {
  let r = 0;
  for (const e of entries) {
    if (e.stream !== stream) continue;
    while (r < rows.length && rows[r]!.id !== e.id && compareIds(rows[r]!.id, e.id) < 0) r++;
    if (rows[r]?.id === e.id) e.deliveryCount = rows[r++]!.deliveries;
  }
}

/** A pipeline's replies, the first error thrown (the loop restarts on it, as on a plain command's). */
function replyValues(results: [Error | null, unknown][], expected: number, command: string): unknown[] {
  return Array.from({ length: expected }, (_, i) => {
    const [err, reply] = results[i] ?? [new Error(`${command} got no reply`), null];
    if (err) throw err;
    return reply;
  });
}
