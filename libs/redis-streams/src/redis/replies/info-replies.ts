import { ReplyShapeError } from './reply-shape-error.js';

/** Replies of XINFO, INFO and CLIENT LIST: part of the one place replies are parsed (re-exported by replies.ts). */

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

/** A stream's idempotent-produce figures of `XINFO STREAM` (Redis 8.6), named after its fields. */
export interface IdempotencyFigures {
  /** `idmp-duration`: how long a producer's key is remembered (s). */
  windowSec: number;
  /** `idmp-maxsize`: most keys remembered per producer id. */
  maxKeys: number;
  pidsTracked: number;
  iidsTracked: number;
  /** Keys written since the stream was made, and repeats answered without a write. */
  iidsAdded: number;
  iidsDuplicates: number;
}

/** The idempotency figures of an `XINFO STREAM` record (parseInfoRecord); null where the server has none (before Redis 8.6, Valkey). */
export function parseIdempotency(info: Record<string, unknown>): IdempotencyFigures | null {
  if (info['idmp-duration'] === undefined) return null;
  const n = (field: string) => {
    const v = Number(info[field]);
    if (!Number.isSafeInteger(v) || v < 0) throw new ReplyShapeError('XINFO STREAM', info);
    return v;
  };
  return {
    windowSec: n('idmp-duration'),
    maxKeys: n('idmp-maxsize'),
    pidsTracked: n('pids-tracked'),
    iidsTracked: n('iids-tracked'),
    iidsAdded: n('iids-added'),
    iidsDuplicates: n('iids-duplicates'),
  };
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
