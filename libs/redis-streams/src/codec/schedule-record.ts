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

/** A stored record, or undefined when it is none this version reads (hand-written, a later version's, damaged). */
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
  if (r.catchUp !== 'once' && r.catchUp !== 'skip') return undefined;
  return r as ScheduleRecord;
}
