import type { StreamEntry } from './stream-entry.js';

/** The one place Redis stream replies are turned into typed values. */

export interface AutoClaimResult {
  /** Where the next XAUTOCLAIM of this stream starts; `'0-0'` once the PEL was scanned to its end. */
  readonly cursor: string;
  readonly entries: StreamEntry[];
  /** Ids that were pending but are gone from the stream (trimmed); Redis already dropped them from the PEL. */
  readonly deletedIds: string[];
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
  return { stream, id: String(id), fields: fields === null ? null : asStrings(fields), deliveryCount };
}

/** ioredis already hands strings; copy only when it did not (Buffers, numbers). */
function asStrings(values: unknown[]): string[] {
  for (const v of values) if (typeof v !== 'string') return values.map(String);
  return values as string[];
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
