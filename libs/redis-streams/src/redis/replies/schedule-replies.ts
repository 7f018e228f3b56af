import { ReplyShapeError } from './reply-shape-error.js';

/** The schedule scripts' answers (redis/upkeep/schedule-scripts.ts) as typed values. */

/** A schedule due soon, as SCHEDULE_LOOK_SCRIPT found it. */
export interface DueSchedule {
  id: string;
  /** Its next fire (the sorted set's score): what the fire script compares. */
  at: number;
  /** Its record as stored ('' when gone). */
  record: string;
}

/** One stream's part of a look. */
export interface ScheduleLookRow {
  due: DueSchedule[];
  /** Ms from the look's now to its first fire past the horizon; undefined: none. */
  nextInMs: number | undefined;
  /** The call's budget stopped inside it ('stopped') or before it ('unlooked'): look again at once. */
  more?: 'stopped' | 'unlooked';
  /** Why its schedules cannot be read (a key of another type named like ours). */
  refused?: string;
}

export interface ScheduleLook {
  /** Redis' clock at the look (Unix ms). */
  now: number;
  rows: ScheduleLookRow[];
}

const str = (what: string, reply: unknown, v: unknown): string => {
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  throw new ReplyShapeError(what, reply);
};

const int = (what: string, reply: unknown, v: unknown): number => {
  const n = Number(typeof v === 'string' || typeof v === 'number' ? v : NaN);
  if (!Number.isFinite(n)) throw new ReplyShapeError(what, reply);
  return Math.trunc(n);
};

export function parseScheduleLook(reply: unknown, streams: number): ScheduleLook {
  const what = 'schedule look script';
  if (!Array.isArray(reply) || reply.length !== streams + 1) throw new ReplyShapeError(what, reply);
  const now = int(what, reply, reply[0]);
  const rows = reply.slice(1).map((row: unknown): ScheduleLookRow => {
    if (!Array.isArray(row) || row.length < 3 || (row.length - 3) % 3 !== 0) throw new ReplyShapeError(what, reply);
    const next = int(what, reply, row[0]);
    const more = int(what, reply, row[1]);
    const refused = str(what, reply, row[2]);
    const due: DueSchedule[] = [];
    for (let i = 3; i < row.length; i += 3)
      due.push({ id: str(what, reply, row[i]), at: int(what, reply, row[i + 1]), record: str(what, reply, row[i + 2]) });
    return {
      due,
      nextInMs: next < 0 ? undefined : next,
      ...(more === 1 ? { more: 'stopped' as const } : more === 2 ? { more: 'unlooked' as const } : {}),
      ...(refused === '' ? {} : { refused }),
    };
  });
  return { now, rows };
}

/** A fire order's outcome: done, raced (another worker or an update got there first), or waiting behind its last fire (due in `waitMs`). */
export type FireOutcome = { done: true } | { done: false; waitMs?: number };

export function parseFireReply(reply: unknown, fires: number): FireOutcome[] {
  const what = 'schedule fire script';
  if (!Array.isArray(reply) || reply.length !== fires) throw new ReplyShapeError(what, reply);
  return reply.map((row: unknown): FireOutcome => {
    if (!Array.isArray(row) || row.length !== 2) throw new ReplyShapeError(what, reply);
    const code = int(what, reply, row[0]);
    if (code === 1) return { done: true };
    return code === 2 ? { done: false, waitMs: int(what, reply, row[1]) } : { done: false };
  });
}

export interface ScheduleState {
  now: number;
  /** The last fire handed over, as stored ('' none): the set's CAS compares it. */
  lastFire: string;
  record: string;
}

export function parseScheduleState(reply: unknown): ScheduleState {
  const what = 'schedule state script';
  if (!Array.isArray(reply) || reply.length !== 3) throw new ReplyShapeError(what, reply);
  return { now: int(what, reply, reply[0]), lastFire: str(what, reply, reply[1]), record: str(what, reply, reply[2]) };
}

export interface ScheduleSetReply {
  /** false: the last fire changed meanwhile (a worker fired it): read again. */
  applied: boolean;
  existed: boolean;
  /** A fire handed over and not due yet was taken back (the update fires in its place). */
  cancelled: boolean;
  next: number | undefined;
}

export function parseScheduleSet(reply: unknown): ScheduleSetReply {
  const what = 'schedule set script';
  if (!Array.isArray(reply) || reply.length !== 4) throw new ReplyShapeError(what, reply);
  const [applied, existed, cancelled, next] = reply.map((v) => int(what, reply, v));
  return { applied: applied === 1, existed: existed === 1, cancelled: cancelled === 1, next: next! < 0 ? undefined : next };
}

export function parseScheduleRemove(reply: unknown): { existed: boolean; cancelled: boolean } {
  const what = 'schedule remove script';
  if (!Array.isArray(reply) || reply.length !== 2) throw new ReplyShapeError(what, reply);
  return { existed: int(what, reply, reply[0]) === 1, cancelled: int(what, reply, reply[1]) === 1 };
}

/** A stored schedule as the list and get scripts answer it. */
export interface StoredSchedule {
  id: string;
  record: string;
  next: number | undefined;
  lastFire: number | undefined;
}

export interface SchedulePage {
  now: number;
  cursor: string;
  total: number;
  schedules: StoredSchedule[];
}

const optionalMs = (what: string, reply: unknown, v: unknown): number | undefined => {
  const s = str(what, reply, v);
  return s === '' ? undefined : int(what, reply, s);
};

export function parseSchedulePage(reply: unknown): SchedulePage {
  const what = 'schedule list script';
  if (!Array.isArray(reply) || reply.length < 3 || (reply.length - 3) % 4 !== 0) throw new ReplyShapeError(what, reply);
  const schedules: StoredSchedule[] = [];
  for (let i = 3; i < reply.length; i += 4)
    schedules.push({
      id: str(what, reply, reply[i]),
      record: str(what, reply, reply[i + 1]),
      next: optionalMs(what, reply, reply[i + 2]),
      lastFire: optionalMs(what, reply, reply[i + 3]),
    });
  return { now: int(what, reply, reply[0]), cursor: str(what, reply, reply[1]), total: int(what, reply, reply[2]), schedules };
}

export function parseScheduleGet(reply: unknown, id: string): { now: number; schedule: StoredSchedule | undefined } {
  const what = 'schedule get script';
  if (!Array.isArray(reply) || reply.length !== 4) throw new ReplyShapeError(what, reply);
  const record = str(what, reply, reply[1]);
  const now = int(what, reply, reply[0]);
  if (record === '') return { now, schedule: undefined };
  return { now, schedule: { id, record, next: optionalMs(what, reply, reply[2]), lastFire: optionalMs(what, reply, reply[3]) } };
}
