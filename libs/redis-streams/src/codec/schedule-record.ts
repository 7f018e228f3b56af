/**
 * A repeatable schedule's record, as stored in `<stream>:delayed:schedules` (field: the schedule's id), read by the
 * workers' fire script, `schedules.list`/`get`, the CLI and the dashboard. JSON, versioned (`v`), and readable
 * by hand (`HGET orders:delayed:schedules nightly`):
 *
 *   {"v":1,"id":"nightly","rev":"k3f…","cron":"0 2 * * *","tz":"Europe/Berlin","catchUp":"once",
 *    "fields":["data","{\"report\":\"daily\"}"],"createdAt":1767225600000,"updatedAt":1767225600000}
 *
 * `fields` is the entry each fire appends (field/value strings, as an emit writes them: `data`, `headers`,
 * `partitionKey`); `rev` changes with every `set`, so that a worker that read the record before an update never
 * fires with what it read (the fire script compares it). Unknown members are kept by readers, not refused: a
 * later version may add some.
 */
export interface ScheduleRecord {
  v: 1;
  id: string;
  rev: string;
  every?: number;
  cron?: string;
  tz?: string;
  startAt?: number;
  endAt?: number;
  catchUp: 'once' | 'skip';
  fields: string[];
  createdAt: number;
  updatedAt: number;
}

/** The record's version this code writes and reads. */
export const SCHEDULE_RECORD_VERSION = 1;

/** The record as stored. */
export function encodeScheduleRecord(record: ScheduleRecord): string {
  return JSON.stringify(record);
}

/** Bounds of a stored record's times, as `set` checks them (schedule-options.ts): a record out of them is damaged. */
const MIN_EVERY_MS = 10;
const MAX_EVERY_MS = 10 * 365 * 86_400_000;
/** The last ms a Date can hold: the bound of a stored time (and the score a damaged record is parked at). */
export const LAST_MS = 8_640_000_000_000_000;

const time = (v: unknown): boolean => v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= LAST_MS);

/**
 * A stored record, or undefined when it is none this version reads (hand-written, a later version's, damaged): each
 * member is checked as `set` checks it (an `every` of 0 or "abc", a `startAt` that is no time), so that a damaged
 * record never reaches the fire computation.
 */
export function decodeScheduleRecord(value: string): ScheduleRecord | undefined {
  let r: Partial<ScheduleRecord>;
  try {
    r = JSON.parse(value) as Partial<ScheduleRecord>;
  } catch {
    return undefined;
  }
  if (typeof r !== 'object' || r === null || r.v !== SCHEDULE_RECORD_VERSION) return undefined;
  if (typeof r.id !== 'string' || typeof r.rev !== 'string' || !Array.isArray(r.fields) || r.fields.some((f) => typeof f !== 'string'))
    return undefined;
  if ((r.every === undefined) === (r.cron === undefined)) return undefined;
  if (
    r.every !== undefined &&
    (typeof r.every !== 'number' || !Number.isSafeInteger(r.every) || r.every < MIN_EVERY_MS || r.every > MAX_EVERY_MS)
  )
    return undefined;
  if (r.cron !== undefined && (typeof r.cron !== 'string' || r.cron === '')) return undefined;
  if (r.tz !== undefined && typeof r.tz !== 'string') return undefined;
  if (!time(r.startAt) || !time(r.endAt) || (r.startAt !== undefined && r.endAt !== undefined && r.endAt < r.startAt)) return undefined;
  if (r.fields.length % 2 !== 0) return undefined;
  if (r.catchUp !== 'once' && r.catchUp !== 'skip') return undefined;
  return r as ScheduleRecord;
}
