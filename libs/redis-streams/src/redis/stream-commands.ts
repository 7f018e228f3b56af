import type { Redis } from 'ioredis';
import { isBusyGroup } from './redis-errors.js';
import type { StreamEntry } from './stream-entry.js';

export interface AutoClaimResult {
  /** Where the next XAUTOCLAIM of this stream starts; `'0-0'` once the PEL was scanned to its end. */
  readonly cursor: string;
  readonly entries: StreamEntry[];
  /** Ids that were pending but are gone from the stream (trimmed); Redis already dropped them from the PEL. */
  readonly deletedIds: string[];
}

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

type LeaseConnection = Redis & {
  streamsLease(key: string, group: string, consumer: string, idleMs: number, ...ids: string[]): Promise<string[]>;
};

/**
 * Every stream command the transport sends, and the one place their replies are parsed.
 * Knows the group; the consumer name is passed in, so one instance serves any consumer.
 */
export class StreamCommands {
  private readonly conn: LeaseConnection;

  constructor(
    conn: Redis,
    private readonly group: string,
  ) {
    conn.defineCommand('streamsLease', { numberOfKeys: 1, lua: LEASE_SCRIPT });
    this.conn = conn as LeaseConnection;
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

  async ack(stream: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return this.conn.xack(stream, this.group, ...ids);
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
}

/** Parses an XREADGROUP/XREAD reply: RESP2 arrays, or a RESP3 map when `replyMapping: 'resp3'`. */
export function parseReadReply(reply: unknown, deliveryCount: number): StreamEntry[] {
  if (reply === null || reply === undefined) return [];
  const entries: StreamEntry[] = [];
  for (const [key, items] of streamPairs(reply)) {
    if (typeof key !== 'string' || !Array.isArray(items)) throw new ReplyShapeError('XREADGROUP', reply);
    for (const item of items) entries.push(parseEntry(key, item, deliveryCount));
  }
  return entries;
}

/**
 * The per-stream pairs of a read reply, in all three shapes ioredis hands out:
 * RESP2 `[[key, items], …]`, RESP3 flattened by `replyMapping: 'legacy'` `[key, items, …]`,
 * and RESP3 `replyMapping: 'resp3'` `{ key: items }`.
 */
function streamPairs(reply: unknown): [unknown, unknown][] {
  if (Array.isArray(reply)) {
    if (reply.every((s) => Array.isArray(s) && s.length === 2)) return reply.map((s) => [s[0], s[1]]);
    const pairs: [unknown, unknown][] = [];
    for (let i = 0; i < reply.length; i += 2) pairs.push([reply[i], reply[i + 1]]);
    return pairs;
  }
  if (reply instanceof Map) return [...reply.entries()];
  if (typeof reply === 'object' && reply !== null) return Object.entries(reply);
  throw new ReplyShapeError('XREADGROUP', reply);
}


/** Parses an XAUTOCLAIM reply: `[cursor, entries, deletedIds]` (Redis >= 7) or `[cursor, entries]` (6.2, deleted entries as nil). */
export function parseAutoClaimReply(stream: string, reply: unknown): AutoClaimResult {
  if (!Array.isArray(reply) || reply.length < 2 || !Array.isArray(reply[1])) throw new ReplyShapeError('XAUTOCLAIM', reply);
  const entries: StreamEntry[] = [];
  const deletedIds: string[] = Array.isArray(reply[2]) ? reply[2].map(String) : [];
  for (const item of reply[1] as unknown[]) {
    // Redis 6.2 lists a deleted entry as nil (or [id, nil]); it already left the PEL.
    if (item === null) continue;
    const entry = parseEntry(stream, item, 0);
    if (entry.fields === null) deletedIds.push(entry.id);
    else entries.push(entry);
  }
  return { cursor: String(reply[0]), entries, deletedIds };
}

/** Parses an extended XPENDING reply into id → delivery count. */
export function parsePendingCounts(reply: unknown): Map<string, number> {
  const counts = new Map<string, number>();
  if (!Array.isArray(reply)) throw new ReplyShapeError('XPENDING', reply);
  for (const row of reply) {
    if (!Array.isArray(row) || row.length < 4) throw new ReplyShapeError('XPENDING', reply);
    counts.set(String(row[0]), Number(row[3]));
  }
  return counts;
}

function parseEntry(stream: string, item: unknown, deliveryCount: number): StreamEntry {
  if (!Array.isArray(item) || item.length < 2) throw new ReplyShapeError('stream entry', item);
  const [id, fields] = item as [unknown, unknown];
  if (fields !== null && !Array.isArray(fields)) throw new ReplyShapeError('stream entry', item);
  return { stream, id: String(id), fields: fields === null ? null : fields.map(String), deliveryCount };
}

/** Orders two stream ids (`ms-seq`) numerically. */
export function compareIds(a: string, b: string): number {
  const [am = 0n, as = 0n] = a.split('-').map(BigInt);
  const [bm = 0n, bs = 0n] = b.split('-').map(BigInt);
  return am === bm ? Number(as - bs) : am < bm ? -1 : 1;
}

export class ReplyShapeError extends Error {
  constructor(command: string, reply: unknown) {
    super(`nestjs-redis-streams: unexpected ${command} reply shape: ${safePreview(reply)}`);
    this.name = 'ReplyShapeError';
  }
}

function safePreview(value: unknown): string {
  try {
    return JSON.stringify(value)?.slice(0, 200) ?? String(value);
  } catch {
    return String(value);
  }
}
