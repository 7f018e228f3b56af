import { ReplyShapeError } from './reply-shape-error.js';
import { FetchedEntry, type StreamEntry } from '../../stream-entry.js';
import type { Confirmation } from '../produce/replication-wait.js';

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
  // RESP2's `[[key, items], …]`, every read's shape by default: read in place (indexed, no pair list, no iterator).
  if (Array.isArray(reply) && arePairs(reply)) {
    for (let i = 0; i < reply.length; i++) {
      const pair = reply[i] as unknown[];
      pushStream(entries, reply, pair[0], pair[1], deliveryCount);
    }
    return entries;
  }
  for (const [key, items] of streamPairs(reply)) pushStream(entries, reply, key, items, deliveryCount);
  return entries;
}

/** One stream's items of a read reply, parsed onto `entries`. */
function pushStream(entries: StreamEntry[], reply: unknown, key: unknown, items: unknown, deliveryCount: number): void {
  if (typeof key !== 'string' || !Array.isArray(items)) throw new ReplyShapeError('XREADGROUP', reply);
  for (let i = 0; i < items.length; i++) entries.push(parseEntry(key, items[i], deliveryCount));
}

/** Whether a read reply is RESP2's list of `[key, items]` pairs. */
function arePairs(reply: readonly unknown[]): boolean {
  for (let i = 0; i < reply.length; i++) {
    const s = reply[i];
    if (!Array.isArray(s) || s.length !== 2) return false;
  }
  return true;
}

/**
 * The per-stream pairs of a read reply, in all three shapes ioredis hands out:
 * RESP2 `[[key, items], …]`, RESP3 flattened by `replyMapping: 'legacy'` `[key, items, …]`,
 * and RESP3 `replyMapping: 'resp3'` `{ key: items }`.
 */
function streamPairs(reply: unknown): [unknown, unknown][] {
  if (Array.isArray(reply)) {
    if (arePairs(reply)) return reply.map((s) => [s[0], s[1]]);
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
  | { readonly id: string; readonly status: 'deleted' | 'above' | 'dropped' }
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
      case 'above':
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

/** One row of OWN_PENDING_SCRIPT: an entry pending under the consumer, and its retry's due time when it waits for one. */
export interface OwnPendingRow {
  readonly id: string;
  readonly idleMs: number;
  readonly deliveryCount: number;
  /** Ms until its retry is due (negative: due already); undefined without a record. */
  readonly dueInMs: number | undefined;
}

/** OWN_PENDING_SCRIPT's answer: null without the stream or the group. */
export function parseOwnPendingReply(reply: unknown): OwnPendingRow[] | null {
  if (reply === -1) return null;
  if (!Array.isArray(reply)) throw new ReplyShapeError('own pending', reply);
  return reply.map((row: unknown) => {
    if (!Array.isArray(row) || row.length !== 4) throw new ReplyShapeError('own pending', reply);
    const [id, idle, count, due] = row as [unknown, unknown, unknown, unknown];
    const parsed = { id: String(id), idleMs: Number(idle), deliveryCount: Number(count), dueInMs: due === '' ? undefined : Number(due) };
    if (!Number.isFinite(parsed.idleMs) || !Number.isInteger(parsed.deliveryCount) || Number.isNaN(parsed.dueInMs))
      throw new ReplyShapeError('own pending', reply);
    return parsed;
  });
}

/** What RETAKE_ORPHANS_SCRIPT found on one stream. */
export interface RetakeResult {
  /** Where the next call starts among the due records; 0 once they were all seen. */
  readonly cursor: number;
  /** Entries made pending under the consumer again, with their fields and their delivery count. */
  readonly entries: StreamEntry[];
  /** Records dropped: their entry is gone from the stream. */
  readonly dropped: number;
}

/** RETAKE_ORPHANS_SCRIPT's answer; `deliveryCount`: what the script set on each entry it retook. */
export function parseRetakeReply(stream: string, reply: unknown, deliveryCount: number): RetakeResult | null {
  if (reply === -1) return null;
  if (!Array.isArray(reply) || reply.length !== 3 || !Array.isArray(reply[1])) throw new ReplyShapeError('retry orphans', reply);
  const [cursor, retaken, dropped] = reply as [unknown, unknown[], unknown];
  const entries = retaken.map((row) => {
    if (!Array.isArray(row) || row.length !== 2 || !Array.isArray(row[1])) throw new ReplyShapeError('retry orphans', reply);
    return parseEntry(stream, row, deliveryCount);
  });
  if (!Number.isInteger(Number(cursor)) || !Number.isInteger(Number(dropped))) throw new ReplyShapeError('retry orphans', reply);
  return { cursor: Number(cursor), entries, dropped: Number(dropped) };
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

/**
 * XACKDEL's answer, one code per id given: 1 acked and deleted, 2 acked and kept (ACKED: another group
 * still needs it), -1 not acked (not pending in the group, or not in the stream). Returns the ids
 * not acked: what an XACK that acked fewer than it was given leaves unsaid.
 */
export function parseAckDeleteReply(reply: unknown, ids: readonly string[]): string[] {
  if (!Array.isArray(reply) || reply.length !== ids.length) throw new ReplyShapeError('XACKDEL', reply);
  const notAcked: string[] = [];
  reply.forEach((code, i) => {
    const n = Number(code);
    if (n === -1) notAcked.push(ids[i]!);
    else if (n !== 1 && n !== 2) throw new ReplyShapeError('XACKDEL', reply);
  });
  return notAcked;
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

/** The rows of `XPENDING key group - + N consumer`, oldest first: id, ms since its last delivery (or lease renewal), delivery count. */
export function parsePendingRows(reply: unknown): { id: string; idleMs: number; deliveries: number }[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XPENDING', reply);
  return reply.map((row: unknown) => {
    if (!Array.isArray(row) || row.length < 4) throw new ReplyShapeError('XPENDING', reply);
    return { id: String(row[0]), idleMs: Number(row[2]), deliveries: Number(row[3]) };
  });
}

/** The rows of `XPENDING key group start + N` (every consumer's), oldest first: {@link parsePendingRows}' figures and each entry's owner. */
export function parsePendingPage(reply: unknown): { id: string; idleMs: number; deliveries: number; consumer: string }[] {
  return parsePendingRows(reply).map((row, i) => ({ ...row, consumer: String(((reply as unknown[])[i] as unknown[])[1]) }));
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

/**
 * One entry: `[id, fields]`, or under `XREADGROUP … CLAIM` (Redis 8.4+) `[id, fields, idle-ms,
 * deliveries-before-this-read]`, whose count is then exact (this read included): 1 for a new
 * entry, more for one claimed from a peer (or from this consumer, idle past the threshold).
 */
function parseEntry(stream: string, item: unknown, deliveryCount: number): StreamEntry {
  if (!Array.isArray(item) || (item.length !== 2 && item.length !== 4)) throw new ReplyShapeError('stream entry', item);
  // Indexed, not destructured: no iterator per entry.
  const id: unknown = item[0];
  const fields: unknown = item[1];
  if (fields !== null && !Array.isArray(fields)) throw new ReplyShapeError('stream entry', item);
  const before = item.length === 4 ? Number(item[3]) : undefined;
  if (before !== undefined && !(Number.isInteger(before) && before >= 0)) throw new ReplyShapeError('stream entry', item);
  return new FetchedEntry(
    stream,
    typeof id === 'string' ? id : String(id),
    fields === null ? null : asStrings(fields),
    before === undefined ? deliveryCount : before + 1,
  );
}

/** ioredis already hands strings; copy only when it did not (Buffers, numbers). */
function asStrings(values: unknown[]): string[] {
  for (let i = 0; i < values.length; i++) if (typeof values[i] !== 'string') return values.map(String);
  return values as string[];
}

/**
 * RECLAIM_ROUND_SCRIPT's reply for `streams`: each visited stream's XAUTOCLAIM result (one the
 * script left out claimed nothing, found nothing deleted and ended its scan: cursor 0-0);
 * undefined for a stream the round did not reach; `error`: the reply of the stream that failed.
 */
export function parseReclaimRoundReply(
  streams: readonly string[],
  reply: unknown,
): { results: (AutoClaimResult | undefined)[]; error?: string } {
  if (!Array.isArray(reply) || reply.length % 2 !== 1) throw new ReplyShapeError('reclaim round', reply);
  const visited = Number(reply[0]);
  const results = streams.map((_, i): AutoClaimResult | undefined =>
    i < visited ? { cursor: '0-0', entries: [], deletedIds: [] } : undefined,
  );
  let error: string | undefined;
  for (let i = 1; i < reply.length; i += 2) {
    const index = Number(reply[i]);
    if (index < 0 && i === reply.length - 2) error = String(reply[i + 1]);
    else if (index >= 1 && index <= visited) results[index - 1] = parseAutoClaimReply(streams[index - 1]!, reply[i + 1]);
    else throw new ReplyShapeError('reclaim round', reply);
  }
  return error === undefined ? { results } : { results, error };
}

/** One ownership beat (OWNERSHIP_SCRIPT): whether this consumer owns the partition, at which epoch, how many members share, who owns it. */
export interface OwnershipBeat {
  state: 'standby' | 'owned' | 'release';
  epoch: number;
  members: number;
  /** The owner key's value (`<epoch> <token> <consumer>`), '' when free. */
  owner: string;
}

const OWNERSHIP_STATES = ['standby', 'owned', 'release'] as const;

export function parseOwnershipReply(reply: unknown): OwnershipBeat {
  if (!Array.isArray(reply) || reply.length !== 4) throw new ReplyShapeError('ownership script', reply);
  const [state, epoch, members, owner] = reply as unknown[];
  const named = OWNERSHIP_STATES[Number(state)];
  if (!named || typeof owner !== 'string') throw new ReplyShapeError('ownership script', reply);
  return { state: named, epoch: Number(epoch), members: Number(members), owner };
}

/** XAUTOCLAIM … JUSTID: the next cursor and how many ids it took. */
export function parseAutoClaimIds(reply: unknown): { cursor: string; taken: number } {
  if (!Array.isArray(reply) || typeof reply[0] !== 'string' || !Array.isArray(reply[1])) throw new ReplyShapeError('XAUTOCLAIM', reply);
  return { cursor: reply[0], taken: reply[1].length };
}

/** An ordered partition's owner value, `<epoch> <token> <consumer>` → its parts; undefined for nothing (or a value not ours). */
export function parseOwnerValue(value: unknown): { epoch: number; token: string; consumer: string } | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d+) (\S+) (.*)$/s.exec(value);
  return m ? { epoch: Number(m[1]), token: m[2]!, consumer: m[3]! } : undefined;
}

/** A whole-number array reply of `length` (the delayed-delivery scripts' answers). */
function integers(what: string, reply: unknown, length: number): number[] {
  if (!Array.isArray(reply) || reply.length !== length) throw new ReplyShapeError(what, reply);
  const out = reply.map(Number);
  if (out.some((n) => !Number.isInteger(n))) throw new ReplyShapeError(what, reply);
  return out;
}

/** SCHEDULE_SCRIPT's answer: whether it was scheduled now (false: that id already waits) and its due time in Redis ms. */
export function parseScheduleReply(reply: unknown): { scheduled: boolean; dueAt: number } {
  const [scheduled, dueAt] = integers('schedule script', reply, 2);
  return { scheduled: scheduled === 1, dueAt: dueAt! };
}

/** What a promotion did, and what still waits: `nextDueInMs` undefined when nothing does. */
export interface Promotion {
  moved: number;
  /** Ids without a value (cancelled meanwhile, or a raw producer's ZADD alone): nothing to deliver. */
  dropped: number;
  nextDueInMs: number | undefined;
  waiting: number;
  /** Why its due entries cannot go in (the stream refused one: WRONGTYPE, OOM …; a schedule key of another type; an idempotency record it may not read): they wait, and the next look tries again. */
  refused?: string;
  /** The call's budget ended inside this stream ('stopped': more may be due) or before it ('unlooked': nothing above is known). */
  more?: 'stopped' | 'unlooked';
  /** Entries not appended: their idempotency key was held by another write (a repeat). */
  repeats: number;
}

/** PROMOTE_SCRIPT's answer: one Promotion per stream asked, in order. */
export function parsePromoteReply(reply: unknown, streams: number): Promotion[] {
  if (!Array.isArray(reply) || reply.length !== streams) throw new ReplyShapeError('promote script', reply);
  return reply.map((row: unknown) => {
    if (!Array.isArray(row) || row.length !== 7 || typeof row[4] !== 'string') throw new ReplyShapeError('promote script', reply);
    const [moved, dropped, wait, waiting, more, repeats] = integers('promote script', [...row.slice(0, 4), ...row.slice(5)], 6);
    const promotion: Promotion = {
      moved: moved!,
      dropped: dropped!,
      nextDueInMs: wait! < 0 ? undefined : wait!,
      waiting: waiting!,
      repeats: repeats!,
      ...(more === 1 ? { more: 'stopped' as const } : more === 2 ? { more: 'unlooked' as const } : {}),
    };
    return row[4] === '' ? promotion : { ...promotion, refused: row[4] };
  });
}

/** What waits in a stream's schedule (LOOK_SCRIPT). */
export interface DelayedLook {
  waiting: number;
  /** Ms until the next is due (negative: past due; undefined: none waits). */
  nextDueInMs: number | undefined;
  /** Values in the entries hash that no schedule names (undefined: HLEN refused). */
  orphaned: number | undefined;
}

/** LOOK_SCRIPT's answer. */
export function parseDelayedLook(reply: unknown): DelayedLook {
  const [waiting, any, wait, orphaned] = integers('delayed look script', reply, 4);
  return { waiting: waiting!, nextDueInMs: any === 1 ? wait! : undefined, orphaned: orphaned! < 0 ? undefined : orphaned! };
}

/** Who paused a pattern for a group, and when (Unix ms); `by` is '' when the value does not say. */
export interface PauseState {
  at: number | null;
  by: string;
}

/** A pause flag's value (`{"at":…,"by":…}`, see PauseCommands) → its parts; null when there is no flag. A value not ours still pauses, and says nothing. */
export function parsePauseValue(value: unknown): PauseState | null {
  if (value === null || value === undefined) return null;
  try {
    const parsed = JSON.parse(String(value)) as { at?: unknown; by?: unknown };
    return { at: typeof parsed.at === 'number' ? parsed.at : null, by: typeof parsed.by === 'string' ? parsed.by : '' };
  } catch {
    return { at: null, by: '' };
  }
}

/** ACQUIRE_SCRIPT's answer: the grants taken, and when none, the ms until one may be. */
export interface Acquired {
  grants: number;
  waitMs: number;
}

export function parseAcquireReply(reply: unknown): Acquired {
  const [grants, waitMs] = integers('acquire script', reply, 2);
  return { grants: grants!, waitMs: waitMs! };
}

/** WAIT's reply (replicas that acknowledged), or WAITAOF's `[local fsynced, replicas fsynced]`. */
export function parseWaitReply(reply: unknown, fsync: boolean): Confirmation {
  if (!fsync) {
    if (typeof reply !== 'number' || !Number.isInteger(reply) || reply < 0) throw new ReplyShapeError('WAIT', reply);
    return { replicas: reply };
  }
  if (!Array.isArray(reply) || reply.length !== 2 || !reply.every((n) => typeof n === 'number'))
    throw new ReplyShapeError('WAITAOF', reply);
  return { fsynced: (reply[0] as number) > 0, replicas: reply[1] as number };
}

/** An array reply of strings (a script's list of ids). */
export function parseStringList(what: string, reply: unknown): string[] {
  if (!Array.isArray(reply) || !reply.every((x) => typeof x === 'string')) throw new ReplyShapeError(what, reply);
  return reply as string[];
}

/** What an ordered partition's owner said of its durable acks (AckDurability.stateText), as inspect and the dashboard show it. */
export interface DurabilityReport {
  state: 'pending' | 'confirmed' | 'held' | 'degraded';
  /** Unix ms since when. */
  since: number;
  /** Replicas the last wait confirmed (null before the first). */
  confirmed: number | null;
  replicas: number;
  fsync: boolean;
  whenUnconfirmed: 'hold' | 'carry-on';
  refused?: string;
}

const DURABILITY_STATES = ['pending', 'confirmed', 'held', 'degraded'];

/** The durability key's value; null for nothing or a value that is not one (anyone may write a key). */
export function parseDurabilityState(value: unknown): DurabilityReport | null {
  if (typeof value !== 'string' || value.length > 2000) return null;
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(value) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || !DURABILITY_STATES.includes(v.state as string)) return null;
  const n = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
  if (n(v.since) === null || n(v.replicas) === null) return null;
  return {
    state: v.state as DurabilityReport['state'],
    since: n(v.since)!,
    confirmed: n(v.confirmed),
    replicas: n(v.replicas)!,
    fsync: v.fsync === true,
    whenUnconfirmed: v.whenUnconfirmed === 'carry-on' ? 'carry-on' : 'hold',
    ...(typeof v.refused === 'string' ? { refused: v.refused.slice(0, 200) } : {}),
  };
}

/** The key slots scripts' answer: one 0/1 per member asked for (taken or kept: 1). */
export function parseSlotsReply(what: string, reply: unknown, length: number): boolean[] {
  const flags = integers(what, reply, length);
  if (flags.some((f) => f !== 0 && f !== 1)) throw new ReplyShapeError(what, reply);
  return flags.map((f) => f === 1);
}

/** An XRANGE / XREVRANGE reply of `stream`: its entries, each parsed as a read's are. */
export function parseRangeReply(stream: string, reply: unknown): StreamEntry[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('XRANGE', reply);
  return reply.map((item: unknown) => parseEntry(stream, item, 0));
}
