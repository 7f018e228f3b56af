import { cronOf, type CatchUp, type ScheduleTimes, type ScheduleTiming } from '../schedule-times.js';
import { InvalidOptionError, rejectUnknown, shown } from './validate.js';

/**
 * A repeatable schedule of a stream (docs/guide/schedules.md): `schedules.set(stream, id, spec)`. Exactly one of
 * `every` (ms) and `cron` (with an optional IANA `tz`, UTC without one).
 */
export type ScheduleSpec<T = unknown> = ({ every: number; cron?: never; tz?: never } | { cron: string; tz?: string; every?: never }) & {
  /** The first possible fire (a Date or Unix ms, inclusive); an `every` schedule fires at startAt + k × every. Default: none (an `every` schedule fires at Unix-time multiples of it). */
  startAt?: Date | number;
  /** The last possible fire (inclusive); the schedule is removed after it. */
  endAt?: Date | number;
  /** The entry's payload, serialized as `emit` serializes it (JSON by default). */
  payload?: T;
  /** The entry's headers (`ctx.getHeaders()`), as a record's. */
  headers?: Record<string, string>;
  /** The entry's partition key (the `partitionKey` field: an ordered pattern orders by it). */
  partitionKey?: string;
  /** A fire found missed (no worker looked for more than MISSED_AFTER_MS, 5 s): fire it once, late (default), or skip it. */
  catchUp?: CatchUp;
};

/** A spec, validated. */
export interface ResolvedSchedule extends ScheduleTimes {
  catchUp: CatchUp;
  payload: unknown;
  headers: Record<string, string>;
  partitionKey: string | undefined;
}

/** Shortest `every`: one fire a second at most per schedule would be too strict for tests, 10 ms keeps a typo of units out. */
export const MIN_EVERY_MS = 10;
/** Longest `every`: 10 years (a typo of units, as for a delay). */
export const MAX_EVERY_MS = 10 * 365 * 86_400_000;
/** Longest schedule id (characters): it names the schedule's fires too. */
export const MAX_SCHEDULE_ID_CHARS = 200;
/** Largest record (payload, headers and the rest, as stored): every fire decodes it inside a script. */
export const MAX_SCHEDULE_RECORD_BYTES = 64 * 1024;

const KNOWN = ['every', 'cron', 'tz', 'startAt', 'endAt', 'payload', 'headers', 'partitionKey', 'catchUp'];

/** A schedule's id, validated: a non-empty string of at most MAX_SCHEDULE_ID_CHARS characters, without control characters. */
export function checkScheduleId(id: unknown): string {
  if (typeof id !== 'string' || id === '') throw new InvalidOptionError('id', `must be a non-empty string, got ${shown(id)}`);
  if (id.length > MAX_SCHEDULE_ID_CHARS)
    throw new InvalidOptionError('id', `must be at most ${MAX_SCHEDULE_ID_CHARS} characters, got ${id.length}`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) throw new InvalidOptionError('id', 'must hold no control characters');
  return id;
}

/** `spec` validated, each option named in its error (`every`, `cron`, `tz`, `startAt` …). */
export function resolveSchedule(spec: unknown): ResolvedSchedule {
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
    throw new InvalidOptionError(
      'schedule',
      `must be an object such as { every: 60000 } or { cron: '0 9 * * *', tz: 'Europe/Berlin' }, got ${shown(spec)}`,
    );
  rejectUnknown(spec, KNOWN);
  const s = spec as Record<string, unknown>;
  const timing = timingOf(s);
  const startAt = instant('startAt', s.startAt);
  const endAt = instant('endAt', s.endAt);
  if (startAt !== undefined && endAt !== undefined && endAt < startAt)
    throw new InvalidOptionError(
      'endAt',
      `must not be before startAt (${new Date(startAt).toISOString()}), got ${new Date(endAt).toISOString()}`,
    );
  const catchUp = s.catchUp ?? 'once';
  if (catchUp !== 'once' && catchUp !== 'skip') throw new InvalidOptionError('catchUp', `must be 'once' or 'skip', got ${shown(catchUp)}`);
  const headers = s.headers ?? {};
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers))
    throw new InvalidOptionError('headers', `must be an object of string values, got ${shown(headers)}`);
  for (const [name, value] of Object.entries(headers))
    if (typeof value !== 'string') throw new InvalidOptionError(`headers.${name}`, `must be a string, got ${shown(value)}`);
  if (s.partitionKey !== undefined && typeof s.partitionKey !== 'string')
    throw new InvalidOptionError('partitionKey', `must be a string, got ${shown(s.partitionKey)}`);
  return {
    timing,
    ...(startAt === undefined ? {} : { startAt }),
    ...(endAt === undefined ? {} : { endAt }),
    catchUp,
    payload: s.payload,
    headers: headers as Record<string, string>,
    partitionKey: s.partitionKey as string | undefined,
  };
}

function timingOf(s: Record<string, unknown>): ScheduleTiming {
  const { every, cron, tz } = s;
  if (every !== undefined && cron !== undefined) throw new InvalidOptionError('every', 'give every or cron, not both');
  if (every !== undefined) {
    if (tz !== undefined) throw new InvalidOptionError('tz', 'applies to cron only (every counts real ms)');
    if (typeof every !== 'number' || !Number.isSafeInteger(every) || every < MIN_EVERY_MS || every > MAX_EVERY_MS)
      throw new InvalidOptionError(
        'every',
        `must be a whole number of ms from ${MIN_EVERY_MS} to ${MAX_EVERY_MS} (10 years), got ${shown(every)}`,
      );
    return { every };
  }
  if (cron === undefined) throw new InvalidOptionError('every', 'a schedule needs every (ms) or cron (an expression)');
  if (typeof cron !== 'string' || cron.trim() === '') throw new InvalidOptionError('cron', `must be a cron expression, got ${shown(cron)}`);
  if (cron.length > 200) throw new InvalidOptionError('cron', `must be at most 200 characters, got ${cron.length}`);
  if (tz !== undefined) {
    if (typeof tz !== 'string' || tz === '')
      throw new InvalidOptionError('tz', `must be an IANA time zone such as 'Europe/Berlin', got ${shown(tz)}`);
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
    } catch {
      throw new InvalidOptionError('tz', `must be an IANA time zone such as 'Europe/Berlin', got ${shown(tz)}`);
    }
  }
  try {
    const parsed = cronOf(cron, tz as string | undefined);
    // An expression that can never fire (February 30th) says so now, not by never firing.
    if (parsed.nextRun(new Date(0)) === null) throw new Error('it never fires');
  } catch (err) {
    throw new InvalidOptionError(
      'cron',
      `${shown(cron)} is not a cron expression of 5 or 6 fields: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return tz === undefined ? { cron } : { cron, tz: tz as string };
}

function instant(option: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0)
    throw new InvalidOptionError(
      option,
      `must be a Date or whole Unix ms, got ${value instanceof Date ? 'an invalid Date' : shown(value)}`,
    );
  return ms;
}
