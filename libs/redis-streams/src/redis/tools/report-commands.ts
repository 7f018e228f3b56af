import type { RedisConnection } from '../connection/connect.js';
import { connectedConsumers } from './connected-consumers.js';
import { groupFigures, type GroupFigures } from './group-lag.js';
import { parseConsumerRows, parseGroupRows, parseInfoRecord, type GroupInfo } from '../replies/info-replies.js';
import {
  parseOwnerValue,
  parsePendingDetail,
  parsePendingPage,
  parsePendingRows,
  parseScores,
  parseTimeMs,
  type PendingRow,
} from '../replies/replies.js';
import { ownershipKeysOf, retryKeyOf } from '../../key-names.js';
import { DelayedCommands } from '../upkeep/delayed-commands.js';
import { PauseCommands } from '../intake/pause-commands.js';
import { parseDurabilityState, type DelayedLook, type DurabilityReport, type PauseState } from '../replies/replies.js';
import { scanStreamKeys } from '../stream-keys.js';

/** Most ids one ZMSCORE asks about: the ids shown are bounded already; this keeps one reply small. */
const SCORES_PER_CALL = 1000;

/** A group's retry set as read for some of its entries: Redis' clock, each id's due time (null: no record), and counts. */
export interface RetryRecords {
  /** Redis' clock (ms), the one due times are on. */
  now: number;
  dueAt: Map<string, number | null>;
  /** Records not yet due / past due. */
  waitingCount: number;
  dueCount: number;
}

/**
 * What the operator tools read (the read model of `inspect` and the dashboard, the CLI's checks):
 * XINFO, XPENDING, single entries, a group's retry records and Redis' clock, with the stream keys,
 * a group's true lag and its connected consumers (stream-keys.ts, group-lag.ts,
 * connected-consumers.ts); each reply parsed by the parsers of info-replies.ts and replies.ts.
 * Every call sends its commands as asked, one round trip each: nothing pipelined, nothing cached.
 */
export class ReportCommands {
  constructor(private readonly redis: RedisConnection) {}

  /** XINFO STREAM's fields, as a record (`length`, `last-generated-id`, `entries-added` …). */
  async streamInfo(stream: string): Promise<Record<string, unknown>> {
    return parseInfoRecord(await this.redis.xinfo('STREAM', stream));
  }

  /**
   * An ordered stream's ownership for `group` (docs/guide/ordering.md): its owner, epoch and lease left,
   * and the members sharing its partitions; null when no consumer of the group reads it ordered.
   */
  async ownership(
    stream: string,
    group: string,
  ): Promise<{
    consumer: string | null;
    epoch: number | null;
    leaseMs: number | null;
    members: number;
    durability: DurabilityReport | null;
  } | null> {
    const keys = ownershipKeysOf(stream, group, (this.redis as { isCluster?: boolean }).isCluster === true);
    // No epoch counter: no consumer of the group ever read it ordered (one GET for every other stream).
    if ((await this.redis.get(keys.epoch)) === null) return null;
    // Redis' clock first: Promise.all then handles every reply it waits for (a refusal of one is no unhandled rejection of another).
    const now = parseTimeMs(await this.redis.time());
    const [owner, ttl, members, durability] = await Promise.all([
      this.redis.get(keys.owner),
      this.redis.pttl(keys.owner),
      this.redis.zcount(keys.members, now, '+inf'),
      this.redis.get(keys.durability),
    ]);
    const held = parseOwnerValue(owner);
    return {
      consumer: held?.consumer ?? null,
      epoch: held?.epoch ?? null,
      leaseMs: held && ttl >= 0 ? ttl : null,
      members,
      // What the owner of now said of its durable acks (it expires with its lease).
      durability: held ? parseDurabilityState(durability) : null,
    };
  }

  /** Who paused `stream` for `group`, and when; null while it runs. */
  paused(stream: string, group: string): Promise<PauseState | null> {
    return new PauseCommands(this.redis).state(stream, group);
  }

  /** Delayed entries waiting in `stream`'s schedule, the ms until the next is due (negative: past due), and values no schedule names. */
  delayed(stream: string): Promise<DelayedLook> {
    return new DelayedCommands(this.redis, (this.redis as { isCluster?: boolean }).isCluster === true).look(stream);
  }

  /** Every group's row of XINFO GROUPS. */
  async groups(stream: string): Promise<(GroupInfo & { name: string })[]> {
    return parseGroupRows(await this.redis.xinfo('GROUPS', stream));
  }

  /** Every consumer's row of XINFO CONSUMERS. */
  async consumers(stream: string, group: string): Promise<ReturnType<typeof parseConsumerRows>> {
    return parseConsumerRows(await this.redis.xinfo('CONSUMERS', stream, group));
  }

  /** A group's figures with its true lag (one bounded XRANGE after its row: see group-lag.ts). */
  groupFigures(stream: string, info: GroupInfo): Promise<GroupFigures> {
    return groupFigures(this.redis, stream, info);
  }

  /** The consumers of `group` that have a connection open now (connected-consumers.ts: CLIENT LIST per master). */
  connectedConsumers(group: string): Promise<Set<string>> {
    return connectedConsumers(this.redis, group);
  }

  /** Stream keys matching `pattern` on every master, each with the master it is on (stream-keys.ts). */
  streamKeys(pattern: string): Promise<Map<string, string>> {
    return scanStreamKeys(this.redis, pattern);
  }

  /** The oldest `count` entries pending under `consumer` (XPENDING … - + count consumer). */
  async pendingOf(stream: string, group: string, consumer: string, count: number): Promise<ReturnType<typeof parsePendingRows>> {
    return parsePendingRows(await this.redis.xpending(stream, group, '-', '+', count, consumer));
  }

  /** At most `count` pending entries of the group from `start` (an XPENDING start: `-`, `(id`), each with its owner. */
  async pendingPage(stream: string, group: string, start: string, count: number): Promise<ReturnType<typeof parsePendingPage>> {
    return parsePendingPage(await this.redis.xpending(stream, group, start, '+', count));
  }

  /** Entry `id`'s pending row (owner, deliveries, idle time); undefined when it is not pending in the group. */
  async pendingEntry(stream: string, group: string, id: string): Promise<(PendingRow & { idleMs: number }) | undefined> {
    return parsePendingDetail(id, await this.redis.xpending(stream, group, id, id, 1));
  }

  /** Entry `id`'s fields (XRANGE of that id alone); null when it is not in the stream. */
  async entryFields(stream: string, id: string): Promise<string[] | null> {
    const [entry] = await this.redis.xrange(stream, id, id);
    return entry ? entry[1] : null;
  }

  /** The oldest entry's fields (XRANGE - + COUNT 1); null when the stream is empty or missing. */
  async oldestFields(stream: string): Promise<string[] | null> {
    const [oldest] = await this.redis.xrange(stream, '-', '+', 'COUNT', 1);
    return oldest ? oldest[1] : null;
  }

  /**
   * The retry records of `ids` in the retry set of `group` on `stream` (ZMSCORE, never the whole
   * set), Redis' clock (TIME) and how many records are not yet due / past due (ZCOUNT, O(log n)),
   * in that order. A missing set is no records. A refusal (NOPERM, WRONGTYPE) rejects.
   */
  async retryRecords(stream: string, group: string, ids: readonly string[]): Promise<RetryRecords> {
    const key = retryKeyOf(stream, group, (this.redis as { isCluster?: boolean }).isCluster === true);
    // Any node's clock on a cluster (TIME has no key); the records were written on the slot master's.
    const now = parseTimeMs(await this.redis.call('TIME'));
    const dueAt = new Map<string, number | null>();
    for (let i = 0; i < ids.length; i += SCORES_PER_CALL) {
      const chunk = ids.slice(i, i + SCORES_PER_CALL);
      parseScores(await this.redis.call('ZMSCORE', key, ...chunk), chunk.length).forEach((score, j) => dueAt.set(chunk[j]!, score));
    }
    const waitingCount = Number(await this.redis.zcount(key, `(${now}`, '+inf'));
    const dueCount = Number(await this.redis.zcount(key, '-inf', now));
    return { now, dueAt, waitingCount, dueCount };
  }
}
