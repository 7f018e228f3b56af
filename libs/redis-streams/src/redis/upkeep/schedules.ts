import { randomBytes } from 'node:crypto';
import { FIELD } from '../../codec/wire-format.js';
import { JsonSerializer } from '../../codec/json.js';
import { decodeScheduleRecord, encodeScheduleRecord, SCHEDULE_RECORD_VERSION, type ScheduleRecord } from '../../codec/schedule-record.js';
import { checkScheduleId, MAX_SCHEDULE_RECORD_BYTES, resolveSchedule, type ScheduleSpec } from '../../options/schedule-options.js';
import { InvalidOptionError } from '../../options/validate.js';
import type { Serializer } from '../../ports.js';
import { nextFireAfter, type ScheduleTimes } from '../../schedule-times.js';
import type { RedisConnection } from '../connection/connect.js';
import type { StoredSchedule } from '../replies/schedule-replies.js';
import { ScheduleCommands } from './schedule-commands.js';

/** A stored schedule, as `get` and `list` tell it. */
export interface ScheduleInfo {
  id: string;
  stream: string;
  every?: number;
  cron?: string;
  tz?: string;
  startAt?: number;
  endAt?: number;
  catchUp: 'once' | 'skip';
  /** The entry each fire appends: its field/value strings (`data`, `headers`, `partitionKey`). */
  fields: string[];
  /** The next fire (Unix ms, Redis' clock); undefined: none left. */
  nextFireAt: number | undefined;
  /** The last fire handed to the delayed schedule (Unix ms); undefined: none since its last update. */
  lastFireAt: number | undefined;
  createdAt: number;
  updatedAt: number;
}

/** A record this version cannot read (a later version's, or written by hand): listed with its raw value, never fired by this version. */
export interface UnreadableSchedule {
  id: string;
  stream: string;
  unreadable: string;
}

export interface SetScheduleResult {
  /** false: it existed and was updated. */
  created: boolean;
  /** Its next fire (Unix ms, Redis' clock). */
  nextFireAt: number;
}

/** Most CAS rounds of a set against workers firing the same schedule (each loses only to a fire, which moves on at once). */
const SET_ATTEMPTS = 10;

const rev = (): string => randomBytes(8).toString('hex');

/**
 * A stream's repeatable schedules (docs/guide/schedules.md): create or update (`set`), `remove`, `get`, `list`.
 * Every worker of the stream fires them (each fire one entry, through the delayed schedule). The client's
 * `schedules` is this with the client's key prefix and serializer; a tool or a plain Node producer uses it on a
 * connection of its own: `new Schedules(redis)`.
 */
export class Schedules {
  private readonly commands: ScheduleCommands;
  private readonly serializer: Serializer;

  constructor(redis: RedisConnection, options: { onCluster?: boolean; serializer?: Serializer } = {}) {
    this.commands = new ScheduleCommands(redis, options.onCluster ?? (redis as { isCluster?: boolean }).isCluster === true);
    this.serializer = options.serializer ?? new JsonSerializer();
  }

  /**
   * Creates schedule `id` of `stream`, or updates it: the update takes effect at the next fire; a fire already due
   * (or in the stream) is never fired again, and a fire handed over early and not due yet is replaced by the
   * update's. Each option is validated (InvalidOptionError names it); a schedule with no fire left is refused.
   */
  async set(stream: string, id: string, spec: ScheduleSpec): Promise<SetScheduleResult> {
    checkScheduleId(id);
    const s = resolveSchedule(spec);
    let data: string;
    try {
      data = await this.serializer.serialize(s.payload === undefined ? null : s.payload);
    } catch (err) {
      throw new InvalidOptionError('payload', `cannot be serialized: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (typeof data !== 'string') throw new InvalidOptionError('payload', 'the serializer must make a string of it');
    const fields = [FIELD.data, data];
    if (Object.keys(s.headers).length > 0) fields.push(FIELD.headers, JSON.stringify(s.headers));
    if (s.partitionKey !== undefined) fields.push(FIELD.partitionKey, s.partitionKey);
    const times: ScheduleTimes = {
      timing: s.timing,
      ...(s.startAt === undefined ? {} : { startAt: s.startAt }),
      ...(s.endAt === undefined ? {} : { endAt: s.endAt }),
    };
    for (let attempt = 0; attempt < SET_ATTEMPTS; attempt++) {
      const state = await this.commands.state(stream, id);
      const old = state.record === '' ? undefined : decodeScheduleRecord(state.record);
      const record: ScheduleRecord = {
        v: SCHEDULE_RECORD_VERSION,
        id,
        rev: rev(),
        ...('every' in s.timing
          ? { every: s.timing.every }
          : { cron: s.timing.cron, ...(s.timing.tz === undefined ? {} : { tz: s.timing.tz }) }),
        ...(s.startAt === undefined ? {} : { startAt: s.startAt }),
        ...(s.endAt === undefined ? {} : { endAt: s.endAt }),
        catchUp: s.catchUp,
        fields,
        createdAt: old?.createdAt ?? state.now,
        updatedAt: state.now,
      };
      const encoded = encodeScheduleRecord(record);
      const bytes = Buffer.byteLength(encoded);
      if (bytes > MAX_SCHEDULE_RECORD_BYTES)
        throw new InvalidOptionError(
          'payload',
          `the schedule's record takes ${bytes} bytes, more than ${MAX_SCHEDULE_RECORD_BYTES}: keep large data in a key the entry names`,
        );
      // Strictly after now (Redis' clock); without a fire taken back, after the last fire handed over too.
      const last = state.lastFire === '' ? undefined : Number(state.lastFire);
      const ifCancelled = nextFireAfter(times, state.now - 1);
      const otherwise = nextFireAfter(times, Math.max(state.now - 1, last ?? -Infinity));
      if (ifCancelled === undefined && otherwise === undefined)
        throw new InvalidOptionError('endAt', `the schedule has no fire left after now (${new Date(state.now).toISOString()})`);
      const reply = await this.commands.set(stream, id, encoded, state.lastFire, ifCancelled, otherwise);
      if (!reply.applied) continue;
      if (reply.next === undefined)
        throw new InvalidOptionError('endAt', 'the schedule has no fire left after its last one: it was removed');
      return { created: !reply.existed, nextFireAt: reply.next };
    }
    throw new Error(
      `nestjs-redis-streams: schedule "${id}" of stream "${stream}" kept firing while it was set (${SET_ATTEMPTS} tries): try again`,
    );
  }

  /** Removes schedule `id` of `stream`, and its fire if one waits in the delayed schedule: true if it existed. */
  async remove(stream: string, id: string): Promise<boolean> {
    checkScheduleId(id);
    return (await this.commands.remove(stream, id)).existed;
  }

  /** Schedule `id` of `stream`; undefined when there is none. */
  async get(stream: string, id: string): Promise<ScheduleInfo | UnreadableSchedule | undefined> {
    checkScheduleId(id);
    const { schedule } = await this.commands.get(stream, id);
    return schedule && infoOf(stream, schedule);
  }

  /** Every schedule of `stream` (at most `limit`, in Redis' hash order). */
  async list(stream: string, { limit = 10_000 }: { limit?: number } = {}): Promise<(ScheduleInfo | UnreadableSchedule)[]> {
    const out: (ScheduleInfo | UnreadableSchedule)[] = [];
    let cursor = '0';
    do {
      const page = await this.commands.page(stream, cursor, 200);
      for (const s of page.schedules) if (out.length < limit) out.push(infoOf(stream, s));
      cursor = page.cursor;
    } while (cursor !== '0' && out.length < limit);
    return out;
  }

  /** How many schedules `stream` has, a page of them (from `cursor`, about `count`) and Redis' now: for tools (the dashboard). */
  async page(
    stream: string,
    cursor = '0',
    count = 100,
  ): Promise<{ now: number; total: number; cursor: string; schedules: (ScheduleInfo | UnreadableSchedule)[] }> {
    const page = await this.commands.page(stream, cursor, count);
    return { now: page.now, total: page.total, cursor: page.cursor, schedules: page.schedules.map((s) => infoOf(stream, s)) };
  }
}

function infoOf(stream: string, s: StoredSchedule): ScheduleInfo | UnreadableSchedule {
  const r = decodeScheduleRecord(s.record);
  if (!r) return { id: s.id, stream, unreadable: s.record.slice(0, 1000) };
  return {
    id: s.id,
    stream,
    ...(r.every === undefined ? {} : { every: r.every }),
    ...(r.cron === undefined ? {} : { cron: r.cron }),
    ...(r.tz === undefined ? {} : { tz: r.tz }),
    ...(r.startAt === undefined ? {} : { startAt: r.startAt }),
    ...(r.endAt === undefined ? {} : { endAt: r.endAt }),
    catchUp: r.catchUp,
    fields: r.fields,
    nextFireAt: s.next,
    lastFireAt: s.lastFire,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

/** Whether a listed schedule is one this version reads. */
export function isReadableSchedule(s: ScheduleInfo | UnreadableSchedule): s is ScheduleInfo {
  return !('unreadable' in s);
}
