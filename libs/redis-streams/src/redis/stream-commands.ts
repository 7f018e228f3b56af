import type { Redis } from 'ioredis';
import { isBusyGroup } from './redis-errors.js';
import { compareIds, parseAutoClaimReply, parsePendingCounts, parseReadReply, type AutoClaimResult } from './replies.js';
import { groupIds, type StreamEntry } from './stream-entry.js';

// Resets the idle time of entries this consumer still owns (XCLAIM … JUSTID leaves the
// delivery count alone) and reports which it owned: an entry a peer took meanwhile must
// not be taken back. ARGV[3] is the idle time to set: 0 renews, minIdleMs releases.
const LEASE_SCRIPT = `
local owned = {}
local claim = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    owned[#owned + 1] = ARGV[i]
    claim[#claim + 1] = ARGV[i]
  end
end
if #owned > 0 then
  claim[#claim + 1] = 'IDLE'
  claim[#claim + 1] = ARGV[3]
  claim[#claim + 1] = 'JUSTID'
  redis.call(unpack(claim))
end
return owned
`;

// Moves one entry to its dead-letter stream and acks it, in one step, only while `consumer`
// still owns it: a crash can neither lose it nor write it to the dead-letter stream twice.
// KEYS: source, dead-letter stream; ARGV: group, consumer, id, dead-letter fields…
const DEAD_LETTER_SCRIPT = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return false end
local deadId = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return deadId
`;

type ScriptedConnection = Redis & {
  streamsLease(key: string, group: string, consumer: string, idleMs: number, ...ids: string[]): Promise<string[]>;
  streamsDeadLetter(source: string, dead: string, group: string, consumer: string, id: string, ...fields: string[]): Promise<string | null>;
};

/**
 * Every stream command the transport sends, and the one place their replies are parsed.
 * Knows the group; the consumer name is passed in, so one instance serves any consumer.
 */
export class StreamCommands {
  private readonly conn: ScriptedConnection;

  constructor(
    conn: Redis,
    private readonly group: string,
  ) {
    conn.defineCommand('streamsLease', { numberOfKeys: 1, lua: LEASE_SCRIPT });
    conn.defineCommand('streamsDeadLetter', { numberOfKeys: 2, lua: DEAD_LETTER_SCRIPT });
    this.conn = conn as ScriptedConnection;
  }

  /** XGROUP CREATE … MKSTREAM; an existing group (BUSYGROUP) is fine. Returns true when created. */
  async ensureGroup(stream: string, startId: string): Promise<boolean> {
    try {
      await this.conn.xgroup('CREATE', stream, this.group, startId, 'MKSTREAM');
      return true;
    } catch (err) {
      if (isBusyGroup(err)) return false;
      throw err;
    }
  }

  /**
   * XREADGROUP over several streams at once. `ids[i]` is the start id for `streams[i]`:
   * `'>'` for new entries, an explicit id for this consumer's own pending ones.
   * `blockMs` undefined: no BLOCK. Runs on `conn` (the private lane for blocking reads).
   */
  async readGroup(
    conn: Redis,
    consumer: string,
    streams: readonly string[],
    ids: readonly string[],
    count: number,
    blockMs?: number,
  ): Promise<StreamEntry[]> {
    const block = blockMs === undefined ? [] : ['BLOCK', blockMs];
    const reply = await conn.call('XREADGROUP', 'GROUP', this.group, consumer, 'COUNT', count, ...block, 'STREAMS', ...streams, ...ids);
    return parseReadReply(reply, 1);
  }

  /** XAUTOCLAIM: entries of the group idle for at least `minIdleMs` become `consumer`'s. */
  async autoClaim(stream: string, consumer: string, minIdleMs: number, cursor: string, count: number): Promise<AutoClaimResult> {
    const reply = await this.conn.xautoclaim(stream, this.group, consumer, minIdleMs, cursor, 'COUNT', count);
    return parseAutoClaimReply(stream, reply);
  }

  /**
   * Delivery counts of `consumer`'s pending entries among `ids` (one XPENDING call for the
   * whole batch). Ids missing from the answer are no longer pending under `consumer`.
   */
  async deliveryCounts(stream: string, consumer: string, ids: readonly string[], extra = 0): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    let min = ids[0]!;
    let max = ids[0]!;
    for (const id of ids) {
      if (compareIds(id, min) < 0) min = id;
      if (compareIds(id, max) > 0) max = id;
    }
    // The range may also hold other entries of ours (in hand elsewhere): `extra` leaves room.
    const reply = await this.conn.xpending(stream, this.group, min, max, ids.length + extra, consumer);
    return parsePendingCounts(reply);
  }

  /** Acks entries of any streams in one round trip: one XACK per stream, pipelined. */
  async ackMany(entries: readonly StreamEntry[]): Promise<void> {
    const byStream = groupIds(entries);
    if (byStream.size === 1) {
      for (const [stream, ids] of byStream) await this.conn.xack(stream, this.group, ...ids);
      return;
    }
    const pipeline = this.conn.pipeline();
    for (const [stream, ids] of byStream) pipeline.xack(stream, this.group, ...ids);
    for (const [err] of (await pipeline.exec()) ?? []) if (err) throw err;
  }

  /**
   * Sets the idle time of the entries `consumer` still owns among `ids` to `idleMs`
   * (0 renews the lease; `minIdleMs` hands them to the next peer that beats). Returns the
   * ids it owned.
   */
  async setIdle(stream: string, consumer: string, ids: readonly string[], idleMs: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const owned = await this.conn.streamsLease(stream, this.group, consumer, idleMs, ...ids);
    return owned.map(String);
  }

  /**
   * Appends `fields` to `deadStream` and acks `id` in `stream`, atomically, if `consumer` still
   * owns the entry. Returns the dead-letter entry id, or null when the entry was no longer ours.
   */
  async deadLetter(stream: string, deadStream: string, consumer: string, id: string, fields: readonly string[]): Promise<string | null> {
    return this.conn.streamsDeadLetter(stream, deadStream, this.group, consumer, id, ...fields);
  }

  /**
   * Appends one reply to a request's reply stream and (re)sets the stream's TTL in the same
   * MULTI, so a stream whose client went away expires instead of growing.
   */
  async reply(replyTo: string, fields: readonly string[], ttlMs: number): Promise<void> {
    const results = await this.conn.multi().xadd(replyTo, 'MAXLEN', '~', REPLY_STREAM_MAXLEN, '*', ...fields).pexpire(replyTo, ttlMs).exec();
    const failed = results?.find(([err]) => err);
    if (failed) throw failed[0];
  }
}

/** Upper bound of a reply stream: its client deletes what it read, so this only caps a dead client's. */
const REPLY_STREAM_MAXLEN = 1000;
