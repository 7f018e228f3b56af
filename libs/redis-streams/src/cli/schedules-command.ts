import { escapeControl as e, safeJson } from '../escape-control.js';
import { InvalidOptionError } from '../options/validate.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { isReadableSchedule, Schedules, type ScheduleInfo, type UnreadableSchedule } from '../redis/upkeep/schedules.js';
import { UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';

export const SCHEDULES_USAGE = `schedules (list <stream> | set <stream> <id> (--every MS | --cron EXPR [--tz ZONE]) [set's flags] | remove <stream> <id>) [--json]`;

export const SCHEDULES_HELP = `schedules: a stream's repeatable schedules (docs/guide/schedules.md). list: each with its timing, next fire
and last fire (Redis' clock). set [--payload JSON] [--headers JSON] [--partition-key K] [--start-at TIME]
[--end-at TIME] [--catch-up once|skip]: creates or updates one (every MS, or a cron expression of 5 or 6 fields in
--tz, an IANA zone, UTC without); --payload is the entry's payload as JSON (default null), --headers a JSON
object of strings; --start-at and --end-at are ISO times or Unix ms; --catch-up says what a fire missed while no
worker ran becomes (once, the default: fired once, late; skip: none). Workers of the stream fire it, each fire
one entry. remove: deletes it, and its fire if one waits. <stream> is the stream key as workers read it
(keyPrefix included). Rights: on the keys <stream>:delayed:schedules, :next and :fired (and
<stream>:delayed, :delayed:entries for set and remove) +hget +hset +hdel +hexists +hlen +hscan +zscore +zadd +zrem +time, in scripts.`;

export type SchedulesFlags = {
  every?: string;
  cron?: string;
  tz?: string;
  payload?: string;
  headers?: string;
  'partition-key'?: string;
  'start-at'?: string;
  'end-at'?: string;
  'catch-up'?: string;
  json: boolean;
};

export const SCHEDULES_FLAGS = {
  every: { type: 'string' },
  cron: { type: 'string' },
  tz: { type: 'string' },
  payload: { type: 'string' },
  headers: { type: 'string' },
  'partition-key': { type: 'string' },
  'start-at': { type: 'string' },
  'end-at': { type: 'string' },
  'catch-up': { type: 'string' },
} as const;

const fail = (message: string): never => {
  throw new UsageError(message);
};

function json(flag: string, value: string | undefined): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value);
  } catch (err) {
    return fail(`${flag} must be JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function time(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(ms)) return fail(`${flag} must be an ISO time or Unix ms, got ${e(value)}`);
  return ms;
}

/** The spec a `set` names, checked before connecting (flags and JSON; the options' own checks come at set). */
export function scheduleSpecOf(values: SchedulesFlags): Record<string, unknown> {
  if (values.every === undefined && values.cron === undefined) fail('schedules set needs --every MS or --cron EXPR');
  const every =
    values.every === undefined ? undefined : /^\d+$/.test(values.every) ? Number(values.every) : fail('--every must be whole ms');
  const spec: Record<string, unknown> = {
    ...(every === undefined ? {} : { every }),
    ...(values.cron === undefined ? {} : { cron: values.cron }),
    ...(values.tz === undefined ? {} : { tz: values.tz }),
    payload: json('--payload', values.payload) ?? null,
    ...(values.headers === undefined ? {} : { headers: json('--headers', values.headers) }),
    ...(values['partition-key'] === undefined ? {} : { partitionKey: values['partition-key'] }),
    ...(values['start-at'] === undefined ? {} : { startAt: time('--start-at', values['start-at']) }),
    ...(values['end-at'] === undefined ? {} : { endAt: time('--end-at', values['end-at']) }),
    ...(values['catch-up'] === undefined ? {} : { catchUp: values['catch-up'] }),
  };
  return spec;
}

const when = (ms: number | undefined) => (ms === undefined ? '-' : new Date(ms).toISOString());

/** A schedule on one line: id, timing, next and last fire. */
export function scheduleLine(s: ScheduleInfo | UnreadableSchedule): string {
  if (!isReadableSchedule(s)) return `${e(s.id)}  (a record this version cannot read: ${e(s.unreadable.slice(0, 80))})`;
  const timing = s.every !== undefined ? `every ${s.every} ms` : `cron "${e(s.cron!)}"${s.tz ? ` ${e(s.tz)}` : ' UTC'}`;
  const window = `${s.startAt === undefined ? '' : `  from ${when(s.startAt)}`}${s.endAt === undefined ? '' : `  until ${when(s.endAt)}`}`;
  return `${e(s.id)}  ${timing}${window}  next ${when(s.nextFireAt)}  last ${when(s.lastFireAt)}  catch-up ${s.catchUp}`;
}

/** `schedules list|set|remove`; returns the exit code. */
export async function runSchedules(
  redis: RedisConnection,
  sub: string,
  stream: string,
  id: string | undefined,
  spec: Record<string, unknown> | undefined,
  values: SchedulesFlags,
  io: CliIo,
): Promise<number> {
  const schedules = new Schedules(redis);
  if (sub === 'list') {
    const list = await schedules.list(stream);
    if (values.json) io.out(safeJson(list));
    else if (list.length === 0) io.out(`no schedules on "${e(stream)}"`);
    else for (const s of list.sort((a, b) => (a.id < b.id ? -1 : 1))) io.out(scheduleLine(s));
    return 0;
  }
  if (sub === 'remove') {
    const removed = await schedules.remove(stream, id!);
    if (values.json) io.out(safeJson({ stream, id, removed }));
    else io.out(removed ? `removed schedule "${e(id!)}" of "${e(stream)}"` : `"${e(stream)}" has no schedule "${e(id!)}"`);
    return removed ? 0 : 1;
  }
  try {
    const set = await schedules.set(stream, id!, spec as never);
    if (values.json) io.out(safeJson({ stream, id, ...set }));
    else io.out(`${set.created ? 'created' : 'updated'} schedule "${e(id!)}" of "${e(stream)}": next fire ${when(set.nextFireAt)}`);
    return 0;
  } catch (err) {
    // A bad option is the operator's to fix, as a usage error: the message names it.
    if (err instanceof InvalidOptionError) throw new UsageError(err.message);
    throw err;
  }
}
