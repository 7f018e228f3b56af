import { parseIdempotency, parseInfoRecord, type IdempotencyFigures } from '../replies/info-replies.js';
import { ReplyShapeError } from '../replies/reply-shape-error.js';

export interface ConsumerSummary {
  name: string;
  pending: number;
  idleMs: number;
  /** Valkey 8 / Redis 7.2+: ms since its last delivery (-1 never); null where the server has no such figure. */
  inactiveMs: number | null;
  /** Its oldest pending entry's id and idle time; null / -1 when it owns none. */
  oldestPendingId: string | null;
  oldestPendingIdleMs: number | null;
}

export interface GroupSummary {
  name: string;
  pending: number;
  lastDeliveredId: string;
  entriesRead: number | null;
  /** The server's lag (from entries-read); null when it cannot tell. */
  lag: number | null;
  /** The first entry not yet delivered to the group; null when none. */
  firstUndeliveredId: string | null;
  oldestPending: { id: string; consumer: string; idleMs: number } | null;
  /** Its first consumers (at most MAX_CONSUMERS), and how many it has in all. */
  consumers: ConsumerSummary[];
  consumerCount: number;
}

export interface StreamSummary {
  stream: string;
  length: number;
  lastGeneratedId: string;
  entriesAdded: number;
  groups: GroupSummary[];
  /** The stream's oldest entry (what a trim removes first); null when it is empty. */
  firstEntryId: string | null;
  /** Idempotent produce (Redis 8.6): the stream's window and counters; null where the server has none. */
  idempotency: IdempotencyFigures | null;
}

export interface RangePreviewEntry {
  id: string;
  /** Field/value pairs, each cut to the asked bytes (empty when ids only). */
  fields: string[];
  /** Each part's full length in bytes (BROWSE_SCRIPT: of the parts shown only). */
  sizes: number[];
  /** How many parts it has, when `sizes` does not say (BROWSE_SCRIPT). */
  parts?: number;
}

const str = (v: unknown): string => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));
const count = (v: unknown): number | null => (v === null || Number(v) < 0 ? null : Number(v));

/** STREAM_SUMMARY_SCRIPT's reply; null for `{}` (the key is no stream). */
export function parseStreamSummary(stream: string, reply: unknown): StreamSummary | null {
  if (!Array.isArray(reply)) throw new ReplyShapeError('stream summary', reply);
  if (reply.length === 0) return null;
  const [length, lastGeneratedId, entriesAdded, groups, firstEntryId, idmp] = reply as [
    unknown,
    unknown,
    unknown,
    unknown,
    unknown,
    unknown,
  ];
  if (!Array.isArray(groups) || !Array.isArray(idmp)) throw new ReplyShapeError('stream summary', reply);
  return {
    stream,
    length: Number(length),
    lastGeneratedId: str(lastGeneratedId),
    entriesAdded: Number(entriesAdded),
    firstEntryId: firstEntryId === null || firstEntryId === undefined ? null : str(firstEntryId),
    idempotency: parseIdempotency(parseInfoRecord(idmp.map(str))),
    groups: groups.map((g: unknown) => {
      if (!Array.isArray(g) || g.length < 11 || !Array.isArray(g[9])) throw new ReplyShapeError('stream summary', reply);
      return {
        name: str(g[0]),
        pending: Number(g[1]),
        lastDeliveredId: str(g[2]),
        entriesRead: count(g[3]),
        lag: count(g[4]),
        firstUndeliveredId: g[5] === null ? null : str(g[5]),
        oldestPending: g[6] === null ? null : { id: str(g[6]), consumer: str(g[7]), idleMs: Number(g[8]) },
        consumers: (g[9] as unknown[][]).map((c) => ({
          name: str(c[0]),
          pending: Number(c[1]),
          idleMs: Number(c[2]),
          inactiveMs: Number(c[3]) === -2 ? null : Number(c[3]),
          oldestPendingId: c[4] === null ? null : str(c[4]),
          oldestPendingIdleMs: count(c[5]),
        })),
        consumerCount: Number(g[10]),
      };
    }),
  };
}

/** RANGE_PREVIEW_SCRIPT's reply. */
export function parseRangePreview(reply: unknown): RangePreviewEntry[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError('range preview', reply);
  return reply.map((e: unknown) => {
    if (!Array.isArray(e) || e.length < 3 || !Array.isArray(e[1]) || !Array.isArray(e[2]))
      throw new ReplyShapeError('range preview', reply);
    const entry: RangePreviewEntry = { id: str(e[0]), fields: (e[1] as unknown[]).map(str), sizes: (e[2] as unknown[]).map(Number) };
    return e.length > 3 ? { ...entry, parts: Number(e[3]) } : entry;
  });
}

/** A page of entries, newest first: where the read stopped (null: at the oldest) and how many it read. */
export interface BrowsePage {
  entries: RangePreviewEntry[];
  stoppedAt: string | null;
  read: number;
}

export function parseBrowse(reply: unknown): BrowsePage {
  if (!Array.isArray(reply) || reply.length < 3) throw new ReplyShapeError('browse', reply);
  const stopped = reply[1];
  return {
    entries: parseRangePreview(reply[0]),
    stoppedAt: stopped === null || stopped === false || stopped === 0 ? null : str(stopped),
    read: Number(reply[2]),
  };
}
