import { ReplyShapeError } from '../replies/reply-shape-error.js';

const str = (v: unknown): string => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));

/** LETTERS_OF_SCRIPT's answer: the letters of one entry found, how many letters were read, and where the read stopped (null: at the end). */
export interface LettersOf {
  ids: string[];
  read: number;
  stoppedAt: string | null;
}

export function parseLettersOf(reply: unknown): LettersOf {
  if (!Array.isArray(reply) || reply.length < 3 || !Array.isArray(reply[0])) throw new ReplyShapeError('letters of an entry', reply);
  const stopped = reply[2];
  return {
    ids: (reply[0] as unknown[]).map(str),
    read: Number(reply[1]),
    stoppedAt: stopped === null || stopped === false || stopped === 0 ? null : str(stopped),
  };
}

/** One delayed entry as DELAYED_PAGE_SCRIPT shows it. */
export interface DelayedRow {
  /** The scheduled entry's id (what emit gave: not a stream id), or its idempotency key. */
  id: string;
  /** When it is due, Unix ms on Redis' clock. */
  dueAt: number;
  /** Its record's size in bytes (-1: the entries hash holds another type; 0: no record). */
  bytes: number;
  /** Its fields and values, each cut; null when not read (past the call's byte budget, even alone, or no record). */
  fields: string[] | null;
  /** How many fields and values it has (null: more than were read). */
  parts: number | null;
  /** The idempotency key it was scheduled under; null: none. */
  idempotencyKey: string | null;
}

export interface DelayedPage {
  /** How many entries wait in the schedule. */
  waiting: number;
  /** Redis' clock (ms) when read. */
  now: number;
  rows: DelayedRow[];
  /** Where the next page starts (after this id, due then); null: none. */
  next: { id: string; dueAt: number } | null;
}

export function parseDelayedPage(reply: unknown): DelayedPage {
  if (!Array.isArray(reply) || reply.length < 4 || !Array.isArray(reply[2])) throw new ReplyShapeError('delayed page', reply);
  const [waiting, now, rows, next] = reply as [unknown, unknown, unknown[], unknown];
  return {
    waiting: Number(waiting),
    now: Number(now),
    rows: rows.map((r) => {
      if (!Array.isArray(r) || r.length < 6) throw new ReplyShapeError('delayed page', reply);
      const [id, due, bytes, shown, parts, key] = r as unknown[];
      return {
        id: str(id),
        dueAt: Number(due),
        bytes: Number(bytes),
        fields: Array.isArray(shown) ? shown.map(str) : null,
        parts: Number(parts) < 0 ? null : Number(parts),
        idempotencyKey: key === null || key === false || key === undefined ? null : str(key),
      };
    }),
    next: Array.isArray(next) && next.length === 2 ? { id: str(next[0]), dueAt: Number(next[1]) } : null,
  };
}

/** PROMOTE_ONE_SCRIPT's answer: whether this call moved the entry in (and its stream id), or why not. */
export type DelayedPromotion =
  | { moved: true; newId: string }
  /** Its stream refused it: it waits, due as before. */
  | { moved: false; refused: string }
  /** It left the schedule without a write: its idempotency key was held by another write, or it had no record. */
  | { moved: false; dropped: 'repeat' | 'no record' }
  /** It no longer waited (moved in or cancelled already): nothing done. */
  | 'gone';

export function parseDelayedPromotion(reply: unknown): DelayedPromotion {
  if (!Array.isArray(reply) || reply.length < 1) throw new ReplyShapeError('delayed promotion', reply);
  const what = str(reply[0]);
  if (what === 'gone') return 'gone';
  if (what === 'moved' && reply.length === 2) return { moved: true, newId: str(reply[1]) };
  if (what === 'refused' && reply.length === 2) return { moved: false, refused: str(reply[1]) };
  if (what === 'repeat') return { moved: false, dropped: 'repeat' };
  if (what === 'dropped') return { moved: false, dropped: 'no record' };
  throw new ReplyShapeError('delayed promotion', reply);
}
