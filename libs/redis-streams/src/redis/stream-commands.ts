import { detectServerFeatures, type ServerFeatures } from './server-features.js';
import type { Redis } from 'ioredis';
import type { RedisConnection } from './connection/connect.js';
import { isBusyGroup, isErrorReply, isNoSuchKey, isOutOfMemory } from './replies/redis-errors.js';
import { parseGroupInfo, parseGroupRows } from './replies/info-replies.js';
import {
  parseAckDeleteReply,
  parseAuditReply,
  parseLastGeneratedId,
  parseOwnPendingReply,
  parseRangeReply,
  type AuditResult,
  type OwnPendingRow,
} from './replies/replies.js';
import { groupFigures, type GroupFigures } from './tools/group-lag.js';
import { groupIds, type StreamEntry } from '../stream-entry.js';
import { defineScripts, type ScriptedConnection } from './connection/scripted-connection.js';
import { connectedConsumers } from './tools/connected-consumers.js';
import { RetryCommands } from './custody/retry-commands.js';
import { OwnershipCommands } from './tenure/ownership-commands.js';
import { FetchCommands } from './read/fetch-commands.js';
import { DelayedCommands } from './upkeep/delayed-commands.js';
import { PauseCommands } from './intake/pause-commands.js';
import { RateLimitCommands } from './intake/rate-limit-commands.js';
import { KeySlotCommands } from './settle/key-slot-commands.js';
import type { DeadLetterRetention } from '../options/retention-options.js';
import { deadLetterTrimArgs } from './produce/retention.js';

/** How many of a stream's newest entries newestWith looks at. */
const NEWEST_LOOKED_AT = 100;

/** Whether flat field list `fields` holds every name/value pair of `pairs` (a name's first value counts). */
function holdsPairs(fields: readonly string[], pairs: readonly string[]): boolean {
  for (let p = 0; p + 1 < pairs.length; p += 2) {
    let i = 0;
    while (i + 1 < fields.length && fields[i] !== pairs[p]) i += 2;
    if (i + 1 >= fields.length || fields[i + 1] !== pairs[p + 1]) return false;
  }
  return true;
}

/**
 * Most ids one script call takes: Redis' Lua cannot unpack more than ~8,000 values, and a
 * shorter script keeps every other client's wait short. Longer id lists go in several calls,
 * pipelined.
 */
const IDS_PER_SCRIPT_CALL = 1000;

/** Most owed entries one rejoin script takes: each costs it up to seven commands (a look, then a re-delivery). */
const RECOVER_IDS_PER_CALL = 200;

/**
 * How an ack deletes the entry it acks (XACKDEL, Redis 8.2): `KEEPREF` deletes it at once (other
 * groups' references, if any, are left to report it deleted); `ACKED` once no group still needs it.
 */
export type AckDeletePolicy = 'KEEPREF' | 'ACKED';

/** An ack that acked fewer entries of `stream` than it was given: how many, and which when the reply says (XACKDEL). */
export type ShortAck = [stream: string, missing: number, notAcked?: readonly string[]];

/** What one stream's XACK (a count) or XACKDEL (a code per id) reply says was not acked; undefined when all were. */
export function shortAck(
  stream: string,
  ids: readonly string[],
  reply: unknown,
  deletion: AckDeletePolicy | undefined,
): ShortAck | undefined {
  if (deletion) {
    const notAcked = parseAckDeleteReply(reply, ids);
    return notAcked.length > 0 ? [stream, notAcked.length, notAcked] : undefined;
  }
  const missing = ids.length - Number(reply);
  return missing > 0 ? [stream, missing] : undefined;
}

/** What an audited entry is to its consumer (see AUDIT_SCRIPT): in hand, failed and owed, waiting for a scheduled retry, or due for it. */
export type AuditKind = 'held' | 'owed' | 'waiting' | 'retry';
const AUDIT_KINDS: Record<AuditKind, string> = { held: 'h', owed: 'o', waiting: 'w', retry: 'r' };

/**
 * Every stream command the transport sends, and the one place their replies are parsed.
 * Knows the group; the consumer name is passed in, so one instance serves any consumer.
 */
export class StreamCommands {
  private readonly conn: ScriptedConnection;

  /** The retry sets' commands (see RetryCommands). */
  readonly retries: RetryCommands;
  /** The commands that fetch entries: reads, reclaims, delivery counts (see FetchCommands). */
  readonly fetch: FetchCommands;
  /** Ordered partitions' ownership (see OwnershipCommands). */
  readonly ownership: OwnershipCommands;
  /** Delayed entries' schedules (see DelayedCommands). */
  readonly delayed: DelayedCommands;
  /** Patterns' pause flags (see PauseCommands). */
  readonly pauses: PauseCommands;
  /** Patterns' rate limits (see RateLimitCommands). */
  readonly rateLimits: RateLimitCommands;
  /** Fair groups' slots of each key in hand (see KeySlotCommands). */
  readonly keySlots: KeySlotCommands;

  constructor(
    conn: RedisConnection,
    private readonly group: string,
    /** Keys of a cluster: a stream's retry set must share its slot (key-names.ts). */
    onCluster = false,
    /** How much of a dead-letter stream each move keeps (the server's `deadLetterRetention`). */
    private readonly deadLetterRetention?: DeadLetterRetention,
  ) {
    this.conn = defineScripts(conn);
    this.retries = new RetryCommands(this.conn, group, onCluster);
    this.fetch = new FetchCommands(this.conn, group, onCluster);
    this.ownership = new OwnershipCommands(this.conn, group, onCluster);
    this.delayed = new DelayedCommands(this.conn, onCluster);
    this.pauses = new PauseCommands(this.conn);
    this.rateLimits = new RateLimitCommands(this.conn, group, onCluster);
    this.keySlots = new KeySlotCommands(this.conn, group, onCluster);
  }

  /**
   * XGROUP CREATE … MKSTREAM; an existing group (BUSYGROUP) is fine. Returns true when created. A
   * server at its maxmemory refuses XGROUP CREATE (OOM) before it looks whether the group exists:
   * then XINFO GROUPS tells, so a worker restarted while Redis is full still consumes (and its acks
   * free memory); a group that does not exist cannot be created, and the OOM stands.
   */
  async ensureGroup(stream: string, startId: string): Promise<boolean> {
    try {
      await this.conn.xgroup('CREATE', stream, this.group, startId, 'MKSTREAM');
      return true;
    } catch (err) {
      if (isBusyGroup(err)) return false;
      if (isOutOfMemory(err) && (await this.groupExists(stream))) return false;
      throw err;
    }
  }

  private async groupExists(stream: string): Promise<boolean> {
    const rows = await this.conn.xinfo('GROUPS', stream).catch((err: unknown) => {
      if (isNoSuchKey(err)) return [];
      throw err;
    });
    return parseGroupInfo(rows, this.group) !== undefined;
  }

  /**
   * What became of entries `consumer` believes are pending under it (AUDIT_SCRIPT): in hand
   * (`held`), failed and owed (`owed`, claimed for their retry once idle `claimIdleMs`), waiting
   * for a scheduled retry (`waiting`), or due for it (`retry`, claimed). An entry with `reown` set
   * that nobody has pending is made pending under it again, with `count` and `idleMs` (an owed
   * entry keeps its place in the retry schedule); so is a waiting or due one whose retry record is
   * still there. Null when the stream or the group is gone.
   */
  async audit(
    stream: string,
    consumer: string,
    claimIdleMs: number | undefined,
    items: readonly { id: string; kind: AuditKind; reown: boolean; count: number; idleMs?: number }[],
  ): Promise<AuditResult | null> {
    const args = items.flatMap((i) => [
      i.id,
      AUDIT_KINDS[i.kind],
      i.reown ? '1' : '0',
      String(i.count),
      String(Math.max(0, Math.floor(i.idleMs ?? 0))),
    ]);
    const reply = await this.conn.streamsAudit(
      stream,
      this.retries.key(stream),
      this.group,
      consumer,
      claimIdleMs === undefined ? '' : String(claimIdleMs),
      ...args,
    );
    return parseAuditReply(
      stream,
      items.map((i) => i.id),
      reply,
    );
  }

  /**
   * A page of `consumer`'s own pending list on each of `streams` (OWN_PENDING_SCRIPT, one pipeline): at
   * most `count` entries from `start` (XPENDING's: '-', '(' and the last id of the page before, or an
   * id), each with its idle time, its delivery count and, when it waits for a retry, the ms until it
   * is due; null where the stream or the group is gone. Rejects with the first error Redis answered.
   */
  async ownPending(
    streams: readonly { stream: string; start: string; count: number }[],
    consumer: string,
  ): Promise<(OwnPendingRow[] | null)[]> {
    const pipeline = this.conn.pipeline() as ReturnType<ScriptedConnection['pipeline']> & Pick<ScriptedConnection, 'streamsOwnPending'>;
    for (const { stream, start, count } of streams)
      void pipeline.streamsOwnPending(stream, this.retries.key(stream), this.group, consumer, start, count);
    const results = (await pipeline.exec()) ?? [];
    return streams.map((_, i) => {
      const [err, reply] = results[i] ?? [new Error('the own pending script got no reply'), null];
      if (err) throw err;
      return parseOwnPendingReply(reply);
    });
  }

  /**
   * Re-attaches `consumer` to a group that may have been lost and re-created (RECOVER_SCRIPT):
   * moves it past `highest` and re-delivers the `owed` entries nobody has pending, when the
   * group does not know the consumer or `force` says a loss was seen otherwise. Returns whether
   * it was treated as lost, and which owed ids are now pending under the consumer; rejects with a
   * NOGROUP error when the group is gone again (what it owes is then still owed).
   * At most RECOVER_IDS_PER_CALL owed entries a script: once one call found the group lost, the next
   * are told so (its first re-delivery made the group list the consumer again).
   */
  async recoverGroup(
    stream: string,
    consumer: string,
    highest: string,
    owed: readonly [id: string, count: number, reown: boolean][],
    force: boolean,
  ): Promise<{ lost: boolean; owned: string[] }> {
    let lost = false;
    const owned: string[] = [];
    for (let from = 0; from === 0 || from < owed.length; from += RECOVER_IDS_PER_CALL) {
      const args = owed.slice(from, from + RECOVER_IDS_PER_CALL).flatMap(([id, count, reown]) => [id, String(count), reown ? '1' : '0']);
      const reply = await this.conn.streamsRecover(stream, this.group, consumer, highest, force || lost ? '1' : '0', ...args);
      // Gone again since it was ensured: as Redis would say it, so the loop restarts and ensures it anew.
      if (!Array.isArray(reply))
        throw new Error(`NOGROUP the group "${this.group}" of stream "${stream}" is gone (lost again while rejoining it)`);
      lost ||= Number(reply[0]) === 1;
      for (const id of reply[1] ?? []) owned.push(String(id));
    }
    return { lost, owned };
  }

  /**
   * Deletes the consumers of the group idle for `idleMs` or more that own no pending entry (never
   * `self`, never one with a connection open: see connected-consumers.ts), unless the group was
   * cleaned within `intervalMs` (the `lock` key says so): null then.
   */
  async deleteIdleConsumers(stream: string, lock: string, self: string, idleMs: number, intervalMs: number): Promise<string[] | null> {
    const connected = await connectedConsumers(this.conn, this.group);
    const deleted = await this.conn.streamsCleanConsumers(stream, lock, this.group, idleMs, intervalMs, self, ...connected);
    if (typeof deleted === 'number')
      throw new Error(
        `the cleanup's lock key "${lock}" exists without an expiry: it is not this transport's lock (rename that key); no consumer deleted`,
      );
    return deleted === null ? null : deleted.map(String);
  }

  /** Bytes of the entry's fields and values as stored (not as decoded to strings); null when it is gone. */
  async entryBytes(stream: string, id: string): Promise<number | null> {
    const bytes = Number(await this.conn.streamsEntryBytes(stream, id));
    return bytes < 0 ? null : bytes;
  }

  /** The names of the stream's groups (XINFO GROUPS); none when the stream does not exist. */
  async groupNames(stream: string): Promise<string[]> {
    const rows = await this.conn.xinfo('GROUPS', stream).catch((err: unknown) => {
      if (isNoSuchKey(err)) return [];
      throw err;
    });
    return parseGroupRows(rows).map((g) => g.name);
  }

  /** The stream's `last-generated-id`, or null when the key does not exist. */
  async lastGeneratedId(stream: string): Promise<string | null> {
    try {
      return parseLastGeneratedId(await this.conn.xinfo('STREAM', stream));
    } catch (err) {
      if (isNoSuchKey(err)) return null;
      throw err;
    }
  }

  /**
   * This group's lag and pending count on `stream` (XINFO GROUPS, then a bounded XRANGE that makes
   * the lag true: see group-lag.ts); undefined when the group is missing. No stream: nothing waits.
   */
  async groupInfo(stream: string): Promise<GroupFigures | undefined> {
    try {
      const info = parseGroupInfo(await this.conn.xinfo('GROUPS', stream), this.group);
      return info && (await groupFigures(this.conn, stream, info));
    } catch (err) {
      if (isNoSuchKey(err)) return { lag: 0, pending: 0, lastDeliveredId: '0-0' };
      throw err;
    }
  }

  /** A dead-letter stream's length (0 when it does not exist); null when Redis refuses the read (another type, NOPERM without +xlen). */
  async deadLetterCount(key: string): Promise<number | null> {
    try {
      return await this.conn.xlen(key);
    } catch (err) {
      if (isErrorReply(err)) return null;
      throw err;
    }
  }

  /** A stream's length: 0 when it does not exist, or when Redis cannot say (for a warning, never a decision). */
  async streamLength(key: string): Promise<number> {
    return this.conn.xlen(key).catch(() => 0);
  }

  /** PING: is the server answering at all? */
  async ping(): Promise<void> {
    await this.conn.ping();
  }

  /** The server's version and what it offers of the newer stream commands (see server-features.ts). */
  serverFeatures(): Promise<ServerFeatures> {
    return detectServerFeatures(this.conn);
  }

  /**
   * XACK (XACKDEL with `deletion`) of one ordered partition's entries, only while the owner key still holds
   * `fence`, this process' owner value (FENCED_ACK_SCRIPT): a stale owner's ack is refused with FENCED,
   * its entries stay pending.
   */
  async ackFenced(stream: string, ids: readonly string[], fence: string, deletion?: AckDeletePolicy): Promise<ShortAck[]> {
    const owner = this.ownership.keys(stream).owner;
    const reply = await this.conn.streamsFencedAck(owner, stream, this.group, fence, deletion ?? '', ...ids);
    const short = shortAck(stream, ids, reply, deletion);
    return short ? [short] : [];
  }

  /**
   * Acks entries of any streams in one round trip: one XACK per stream, pipelined (with `deletion`,
   * one XACKDEL that deletes them too). Returns the streams where Redis acked fewer than it was given,
   * with how many it did not (and which, as XACKDEL tells): those entries were no longer pending (a
   * peer took and settled them, they were trimmed, the consumer or the group was deleted meanwhile).
   */
  ackMany(entries: readonly StreamEntry[], deletion?: AckDeletePolicy): Promise<ShortAck[]> {
    const byStream = groupIds(entries);
    if (byStream.size === 1) {
      // The hot path (one stream, once per batch): a plain command, no pipeline object, no async frame.
      const [stream, ids] = byStream.entries().next().value!;
      const sent: Promise<unknown> = deletion
        ? this.conn.call('XACKDEL', this.ackDeleteArgs(stream, ids, deletion))
        : this.conn.xack(stream, this.group, ...ids);
      return sent.then((reply) => {
        const short = shortAck(stream, ids, reply, deletion);
        return short ? [short] : [];
      });
    }
    return this.ackByPipeline(byStream, deletion);
  }

  /** Several streams' acks in one pipeline (one round trip). */
  private async ackByPipeline(byStream: Map<string, string[]>, deletion: AckDeletePolicy | undefined): Promise<ShortAck[]> {
    const pipeline = this.conn.pipeline();
    for (const [stream, ids] of byStream) {
      if (deletion) pipeline.call('XACKDEL', ...this.ackDeleteArgs(stream, ids, deletion));
      else pipeline.xack(stream, this.group, ...ids);
    }
    const results = (await pipeline.exec()) ?? [];
    const short: ShortAck[] = [];
    [...byStream].forEach(([stream, ids], i) => {
      const [err, reply] = results[i] ?? [new Error('XACK got no reply'), 0];
      if (err) throw err;
      const found = shortAck(stream, ids, reply, deletion);
      if (found) short.push(found);
    });
    return short;
  }

  /**
   * Whether this user may run XACKDEL on `stream`: a no-op one (`0-1` is in no pending list), so an ACL
   * that denies it refuses the start instead of failing every ack (each failure runs the batch again).
   */
  async probeAckDelete(stream: string, deletion: AckDeletePolicy): Promise<void> {
    await this.conn.call('XACKDEL', ...this.ackDeleteArgs(stream, ['0-1'], deletion));
  }

  private ackDeleteArgs(stream: string, ids: readonly string[], deletion: AckDeletePolicy): (string | number)[] {
    return [stream, this.group, deletion, 'IDS', ids.length, ...ids];
  }

  /**
   * Sets the idle time of the entries `consumer` still owns among `ids` to `idleMs`
   * (0 renews the lease; `minIdleMs` hands them to the next peer that beats). Returns the
   * ids it owned.
   */
  /**
   * Entries of `stream` read and not started, handed back (PUT_BACK_SCRIPT): idle `idleMs`, each with
   * the delivery count it had before this consumer's read; only those still pending under `consumer`.
   * The ids handed back.
   */
  async putBack(
    stream: string,
    consumer: string,
    entries: readonly { id: string; deliveryCount: number }[],
    idleMs: number,
  ): Promise<string[]> {
    const owned: string[] = [];
    for (let i = 0; i < entries.length; i += IDS_PER_SCRIPT_CALL / 2) {
      const pairs = entries.slice(i, i + IDS_PER_SCRIPT_CALL / 2).flatMap((e) => [e.id, Math.max(0, e.deliveryCount - 1)]);
      for (const id of await this.conn.streamsPutBack(stream, this.group, consumer, idleMs, ...pairs)) owned.push(String(id));
    }
    return owned;
  }

  /**
   * Entries of `stream` whose delivery count was put back while they waited in this consumer (an ordered
   * key queue through a pause, or behind its key's limit), about to start: each gets back the count it was
   * read with, idle 0 (PUT_BACK_SCRIPT), only while still pending under `consumer`. The ids it restored.
   */
  async recount(stream: string, consumer: string, entries: readonly { id: string; deliveryCount: number }[]): Promise<string[]> {
    const owned: string[] = [];
    for (let i = 0; i < entries.length; i += IDS_PER_SCRIPT_CALL / 2) {
      const pairs = entries.slice(i, i + IDS_PER_SCRIPT_CALL / 2).flatMap((e) => [e.id, e.deliveryCount]);
      for (const id of await this.conn.streamsPutBack(stream, this.group, consumer, 0, ...pairs)) owned.push(String(id));
    }
    return owned;
  }

  async setIdle(stream: string, consumer: string, ids: readonly string[], idleMs: number): Promise<string[]> {
    if (ids.length === 0) return [];
    if (ids.length <= IDS_PER_SCRIPT_CALL) return (await this.conn.streamsLease(stream, this.group, consumer, idleMs, ...ids)).map(String);
    const pipeline = this.conn.pipeline() as ReturnType<Redis['pipeline']> & { streamsLease(...args: unknown[]): unknown };
    for (let i = 0; i < ids.length; i += IDS_PER_SCRIPT_CALL) {
      pipeline.streamsLease(stream, this.group, consumer, idleMs, ...ids.slice(i, i + IDS_PER_SCRIPT_CALL));
    }
    const owned: string[] = [];
    for (const [err, reply] of (await pipeline.exec()) ?? []) {
      if (err) throw err;
      for (const id of reply as unknown[]) owned.push(String(id));
    }
    return owned;
  }

  /**
   * Appends `fields` to `deadStream` (with `copy`, plus a `fields` field: the entry's pairs as
   * Redis holds them), trimmed to the dead-letter retention, and acks `id` in `stream` (with
   * `deletion`, XACKDEL: the entry leaves the stream too), and drops its retry record, atomically, if
   * `consumer` still owns it. Returns the dead-letter entry id, or null when the entry was no longer ours.
   */
  async deadLetter(
    stream: string,
    deadStream: string,
    consumer: string,
    id: string,
    fields: readonly string[],
    copy: boolean,
    deletion?: AckDeletePolicy,
  ): Promise<string | null> {
    const [trim, trimValue] = deadLetterTrimArgs(this.deadLetterRetention);
    const how = deletion ?? '';
    return this.conn.streamsDeadLetter(
      stream,
      deadStream,
      this.retries.key(stream),
      this.group,
      consumer,
      id,
      copy ? '1' : '0',
      trim,
      trimValue,
      how,
      ...fields,
    );
  }

  /**
   * The id of the newest entry of `key` whose fields hold every name/value pair of `pairs`, among its newest
   * NEWEST_LOOKED_AT; null when the stream holds none at all (all of it looked at), undefined when none of its newest
   * NEWEST_LOOKED_AT does. One entry per call: an entry may be large (a letter's copy of its entry), so no call's
   * reply is more than one entry.
   */
  async newestWith(key: string, pairs: readonly string[]): Promise<string | null | undefined> {
    let end = '+';
    for (let looked = 0; looked < NEWEST_LOOKED_AT; looked++) {
      const [entry] = parseRangeReply(key, await this.conn.xrevrange(key, end, '-', 'COUNT', 1));
      if (!entry) return null;
      if (entry.fields && holdsPairs(entry.fields, pairs)) return entry.id;
      end = `(${entry.id}`;
    }
    return undefined;
  }

  /**
   * Appends one reply to a request's reply stream and (re)sets the stream's TTL in the same
   * MULTI, so a stream whose client went away expires instead of growing.
   */
  async reply(replyTo: string, fields: readonly string[], ttlMs: number): Promise<void> {
    const results = await this.conn
      .multi()
      .xadd(replyTo, 'MAXLEN', '~', REPLY_STREAM_MAXLEN, '*', ...fields)
      .pexpire(replyTo, ttlMs)
      .exec()
      .catch((err: Error & { previousErrors?: Error[] }) => {
        // EXECABORT only says that a queued command was refused: report the refusal (NOPERM …).
        throw err.previousErrors?.[0] ?? err;
      });
    const failed = results?.find(([err]) => err);
    if (failed) throw failed[0];
  }
}

/** Upper bound of a reply stream: its client deletes what it read, so this only caps a dead client's. */
const REPLY_STREAM_MAXLEN = 1000;
