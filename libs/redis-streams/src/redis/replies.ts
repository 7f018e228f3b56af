import { ReplyShapeError } from './reply-shape-error.js';
import type { StreamEntry } from './stream-entry.js';

export { ReplyShapeError };
export { compareIds, idTime } from './stream-ids.js';

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

/**
 * Parses an XAUTOCLAIM reply: `[cursor, entries, deletedIds]`, the shape of Redis >= 7.0 (the
 * oldest server this package accepts). Deleted ids were already dropped from the PEL by Redis.
 */
export function parseAutoClaimReply(stream: string, reply: unknown): AutoClaimResult {
  if (!Array.isArray(reply) || reply.length !== 3 || !Array.isArray(reply[1]) || !Array.isArray(reply[2])) {
    throw new ReplyShapeError('XAUTOCLAIM', reply);
  }
  const entries: StreamEntry[] = [];
  for (const item of reply[1] as unknown[]) {
    const entry = parseEntry(stream, item, 0);
    if (entry.fields === null) throw new ReplyShapeError('XAUTOCLAIM', reply);
    entries.push(entry);
  }
  return { cursor: String(reply[0]), entries, deletedIds: (reply[2] as unknown[]).map(String) };
}

/** One entry's row of `XPENDING key group id id 1`: who owns it and how often it was delivered; undefined when not pending. */
export interface PendingRow {
  readonly consumer: string;
  readonly deliveryCount: number;
}

export function parsePendingRow(id: string, reply: unknown): PendingRow | undefined {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XPENDING', reply);
  if (reply.length === 0) return undefined;
  const row = reply[0] as unknown;
  if (!Array.isArray(row) || row.length < 4 || String(row[0]) !== id) throw new ReplyShapeError('XPENDING', reply);
  return { consumer: String(row[1]), deliveryCount: Number(row[3]) };
}

/** {@link parsePendingRow} with the entry's idle time (ms since its last delivery or lease renewal), for the operator's peek. */
export function parsePendingDetail(id: string, reply: unknown): (PendingRow & { readonly idleMs: number }) | undefined {
  const row = parsePendingRow(id, reply);
  return row && { ...row, idleMs: Number((reply as unknown[][])[0]![2]) };
}

/** What an audit (AUDIT_SCRIPT) found of one entry a consumer believed was pending under it. */
export type AuditFinding =
  | { readonly id: string; readonly status: 'mine'; readonly idleMs: number }
  | { readonly id: string; readonly status: 'other'; readonly owner: string }
  | { readonly id: string; readonly status: 'deleted' | 'dropped' }
  | { readonly id: string; readonly status: 'claimed' | 'reowned'; readonly entry: StreamEntry };

/** The group's answer to an audit: null when the stream or the group is gone. */
export interface AuditResult {
  /** The group lists the consumer (it has read or claimed since the group was created). */
  readonly known: boolean;
  readonly findings: AuditFinding[];
}

export function parseAuditReply(stream: string, ids: readonly string[], reply: unknown): AuditResult | null {
  if (reply === -1) return null;
  if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1]) || reply[1].length !== ids.length)
    throw new ReplyShapeError('audit', reply);
  const findings = (reply[1] as unknown[]).map((row, i): AuditFinding => {
    const id = ids[i]!;
    if (!Array.isArray(row) || typeof row[0] !== 'string') throw new ReplyShapeError('audit', reply);
    const [status, detail, fields] = row as [string, unknown, unknown];
    switch (status) {
      case 'mine':
        return { id, status, idleMs: Number(detail) };
      case 'other':
        return { id, status, owner: String(detail) };
      case 'deleted':
      case 'dropped':
        return { id, status };
      case 'claimed':
      case 'reowned':
        if (!Array.isArray(fields)) throw new ReplyShapeError('audit', reply);
        return { id, status, entry: parseEntry(stream, [id, fields], Number(detail)) };
      default:
        throw new ReplyShapeError('audit', reply);
    }
  });
  return { known: Number(reply[0]) === 1, findings };
}

/** ADOPT_RETRY_SCRIPT's answer: per entry, the ms until its retry, or -1 to try it now. */
export function parseAdoptReply(reply: unknown, count: number): number[] {
  if (!Array.isArray(reply) || reply.length !== count) throw new ReplyShapeError('retry adoption', reply);
  return reply.map((v) => {
    const n = Number(v);
    if (!Number.isFinite(n)) throw new ReplyShapeError('retry adoption', reply);
    return n;
  });
}

/** `redis_version` of an `INFO server` reply (Valkey reports its Redis-compatible version there too). */
export function parseServerVersion(info: string): { version: string; major: number; minor: number; server: string } {
  const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
  const version = field('redis_version');
  const match = version ? /^(\d+)\.(\d+)/.exec(version) : null;
  if (!version || !match) throw new ReplyShapeError('INFO server', info.slice(0, 200));
  const server =
    field('server_name') === 'valkey' ? `Valkey ${field('valkey_version') ?? '?'} (redis_version ${version})` : `Redis ${version}`;
  return { version, major: Number(match[1]), minor: Number(match[2]), server };
}

/** `last-generated-id` of an `XINFO STREAM` reply (flat field/value list, or a map under RESP3). */
export function parseLastGeneratedId(reply: unknown): string {
  const value = Array.isArray(reply)
    ? reply[reply.indexOf('last-generated-id') + 1]
    : reply instanceof Map
      ? reply.get('last-generated-id')
      : (reply as Record<string, unknown> | null)?.['last-generated-id'];
  if (typeof value !== 'string' || !/^\d+-\d+$/.test(value)) throw new ReplyShapeError('XINFO STREAM', reply);
  return value;
}

/** An XINFO reply's field/value list (RESP2 flat array, or a RESP3 map) as a record. */
export function parseInfoRecord(reply: unknown): Record<string, unknown> {
  if (reply instanceof Map) return Object.fromEntries(reply);
  if (!Array.isArray(reply)) {
    if (typeof reply === 'object' && reply !== null) return reply as Record<string, unknown>;
    throw new ReplyShapeError('XINFO', reply);
  }
  const record: Record<string, unknown> = {};
  for (let i = 0; i + 1 < reply.length; i += 2) record[String(reply[i])] = reply[i + 1];
  return record;
}

/** One group's row of `XINFO GROUPS`, as the server reports it. */
export interface GroupInfo {
  /**
   * The server's `lag` (`entries-added` − `entries-read`); null when it cannot tell (entries deleted past
   * the group's last read). Not to be shown as is: a promoted Redis 7.0 replica keeps a stale
   * `entries-read` (its reads are replicated without it), so this can stay high forever; see group-lag.ts.
   */
  reportedLag: number | null;
  /** The server's count of entries the group has read; null when it cannot tell. */
  entriesRead: number | null;
  /** Entries delivered to the group and not yet acked (its PEL). */
  pending: number;
  lastDeliveredId: string;
}

/** The row of `group` in an `XINFO GROUPS` reply; undefined when the stream has no such group. */
export function parseGroupInfo(reply: unknown, group: string): GroupInfo | undefined {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XINFO GROUPS', reply);
  for (const raw of reply) {
    const row = parseInfoRecord(raw);
    if (String(row.name) !== group) continue;
    return parseGroupRow(row, reply);
  }
  return undefined;
}

/** Every group's row of an `XINFO GROUPS` reply, by name. */
export function parseGroupRows(reply: unknown): (GroupInfo & { name: string })[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XINFO GROUPS', reply);
  return reply.map((raw) => {
    const row = parseInfoRecord(raw);
    return { name: String(row.name), ...parseGroupRow(row, reply) };
  });
}

function parseGroupRow(row: Record<string, unknown>, reply: unknown): GroupInfo {
  const pending = Number(row.pending);
  const optional = (value: unknown) => (value === null || value === undefined ? null : Number(value));
  const reportedLag = optional(row.lag);
  const entriesRead = optional(row['entries-read']);
  const lastDeliveredId = String(row['last-delivered-id']);
  const bad = (n: number | null) => n !== null && !Number.isSafeInteger(n);
  if (!Number.isSafeInteger(pending) || bad(reportedLag) || bad(entriesRead) || !/^\d+-\d+$/.test(lastDeliveredId))
    throw new ReplyShapeError('XINFO GROUPS', reply);
  return { reportedLag, entriesRead, pending, lastDeliveredId };
}

/** Every consumer's row of `XINFO CONSUMERS`: its name, the entries pending under it, ms since it last read or claimed. */
export function parseConsumerRows(reply: unknown): { name: string; pending: number; idleMs: number; inactiveMs: number | null }[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XINFO CONSUMERS', reply);
  return reply.map((raw) => {
    const row = parseInfoRecord(raw);
    // `inactive` (Valkey 8, Redis 7.2+): ms since its last delivery, -1 never; `idle` there counts empty reads too.
    const inactive = row.inactive === undefined ? null : Number(row.inactive);
    return { name: String(row.name), pending: Number(row.pending), idleMs: Number(row.idle), inactiveMs: inactive };
  });
}

/** The `name=` of every client in a CLIENT LIST reply (names cannot hold spaces); unnamed clients left out. */
export function parseClientNames(reply: unknown): string[] {
  const text = Buffer.isBuffer(reply) ? reply.toString() : reply;
  if (typeof text !== 'string') throw new ReplyShapeError('CLIENT LIST', reply);
  const names: string[] = [];
  for (const line of text.split('\n')) {
    const name = / name=(\S*)/.exec(` ${line}`)?.[1];
    if (name) names.push(name);
  }
  return names;
}

/** The rows of `XPENDING key group - + N consumer`, oldest first: id, ms since its last delivery (or lease renewal), delivery count. */
export function parsePendingRows(reply: unknown): { id: string; idleMs: number; deliveries: number }[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XPENDING', reply);
  return reply.map((row: unknown) => {
    if (!Array.isArray(row) || row.length < 4) throw new ReplyShapeError('XPENDING', reply);
    return { id: String(row[0]), idleMs: Number(row[2]), deliveries: Number(row[3]) };
  });
}

/** A TIME reply as ms (Redis' clock, the one retry due times are on). */
export function parseTimeMs(reply: unknown): number {
  if (!Array.isArray(reply) || reply.length !== 2) throw new ReplyShapeError('TIME', reply);
  return Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000);
}

/** A ZMSCORE reply: each member's score, null when it is not in the set (or the set does not exist). */
export function parseScores(reply: unknown, count: number): (number | null)[] {
  if (!Array.isArray(reply) || reply.length !== count) throw new ReplyShapeError('ZMSCORE', reply);
  return reply.map((v) => (v === null ? null : Number(v)));
}

/** A SCAN reply: the next cursor ('0' once done) and this batch's keys. */
export function parseScanReply(reply: unknown): { cursor: string; keys: string[] } {
  if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1])) throw new ReplyShapeError('SCAN', reply);
  return { cursor: String(reply[0]), keys: (reply[1] as unknown[]).map(String) };
}

/** How many entries an XRANGE reply holds (a flat array of entries under RESP2 and RESP3 alike). */
export function parseRangeCount(reply: unknown): number {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XRANGE', reply);
  return reply.length;
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

/**
 * RECLAIM_ROUND_SCRIPT's reply for `streams`: each stream's XAUTOCLAIM result; a stream the script
 * left out claimed nothing, found nothing deleted and ended its scan (cursor 0-0).
 */
export function parseReclaimRoundReply(streams: readonly string[], reply: unknown): AutoClaimResult[] {
  if (!Array.isArray(reply) || reply.length % 2 !== 0) throw new ReplyShapeError('reclaim round', reply);
  const results = streams.map((): AutoClaimResult => ({ cursor: '0-0', entries: [], deletedIds: [] }));
  for (let i = 0; i < reply.length; i += 2) {
    const stream = streams[Number(reply[i]) - 1];
    if (stream === undefined) throw new ReplyShapeError('reclaim round', reply);
    results[Number(reply[i]) - 1] = parseAutoClaimReply(stream, reply[i + 1]);
  }
  return results;
}
