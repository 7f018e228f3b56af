import { MAX_SCHEDULE_RECORD_BYTES } from '../../options/schedule-options.js';
import { delayedKeysOf, scheduleKeysOf, type ScheduleKeys } from '../../key-names.js';
import type { RedisConnection } from '../connection/connect.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';
import {
  parseFireReply,
  parseScheduleGet,
  parseScheduleLook,
  parseSchedulePage,
  parseScheduleRemove,
  parseScheduleSet,
  parseScheduleState,
  type FireOutcome,
  type ScheduleLook,
  type SchedulePage,
  type ScheduleSetReply,
  type ScheduleState,
  type StoredSchedule,
} from '../replies/schedule-replies.js';
import {
  SCHEDULE_FIRE_SCRIPT,
  SCHEDULE_GET_SCRIPT,
  SCHEDULE_LIST_SCRIPT,
  SCHEDULE_LOOK_SCRIPT,
  SCHEDULE_REMOVE_SCRIPT,
  SCHEDULE_SET_SCRIPT,
  SCHEDULE_STATE_SCRIPT,
} from './schedule-scripts.js';

const SCHEDULE_SCRIPTS: readonly LuaScript[] = [
  // The look takes its key count from the call (two per stream).
  luaScript('streamsScheduleLook', undefined, SCHEDULE_LOOK_SCRIPT),
  luaScript('streamsScheduleFire', 5, SCHEDULE_FIRE_SCRIPT),
  luaScript('streamsScheduleState', 2, SCHEDULE_STATE_SCRIPT),
  luaScript('streamsScheduleSet', 5, SCHEDULE_SET_SCRIPT),
  luaScript('streamsScheduleRemove', 5, SCHEDULE_REMOVE_SCRIPT),
  luaScript('streamsScheduleList', 3, SCHEDULE_LIST_SCRIPT),
  luaScript('streamsScheduleGet', 3, SCHEDULE_GET_SCRIPT),
];

/** What one look reads at most, for all of a reader's streams together: a short script keeps every other client's wait short. */
export const LOOK_BUDGET = { schedules: 200, bytes: 1_000_000 };

/** One fire (or skip) for the fire script. */
export interface FireOrder {
  id: string;
  /** The fire time the look found (the CAS). */
  at: number;
  /** The record's rev the next fire was computed from. */
  rev: string;
  action: 'fire' | 'skip' | 'drop' | 'park';
  /** The next fire; undefined: none left, the schedule ends. */
  next: number | undefined;
}

type Variadic = (keyCount: number, ...keysThenArgs: (string | number)[]) => Promise<unknown>;
type Fixed = (...keysThenArgs: (string | number)[]) => Promise<unknown>;
type ScheduleConnection = RedisConnection & {
  streamsScheduleLook: Variadic;
  streamsScheduleFire: Fixed;
  streamsScheduleState: Fixed;
  streamsScheduleSet: Fixed;
  streamsScheduleRemove: Fixed;
  streamsScheduleList: Fixed;
  streamsScheduleGet: Fixed;
};

/** Repeatable schedules' commands (the scripts of schedule-scripts.ts): the workers' looks and fires, and the API's set, remove, list and get. */
export class ScheduleCommands {
  private readonly conn: ScheduleConnection;

  constructor(
    conn: RedisConnection,
    private readonly onCluster: boolean,
  ) {
    defineLuaScripts(conn, SCHEDULE_SCRIPTS);
    this.conn = conn as ScheduleConnection;
  }

  keys(stream: string): ScheduleKeys {
    return scheduleKeysOf(stream, this.onCluster);
  }

  /** Keys of the set, fire and remove scripts: the schedule's three, then the stream's delayed schedule and entries. */
  private fiveKeys(stream: string): string[] {
    const k = this.keys(stream);
    const d = delayedKeysOf(stream, this.onCluster);
    return [k.next, k.records, k.fired, d.schedule, d.entries];
  }

  /** The schedules of `streams` due within `horizonMs` of Redis' now (on a cluster the streams share a slot). */
  async look(streams: readonly string[], horizonMs: number, budget = LOOK_BUDGET): Promise<ScheduleLook> {
    const keys = streams.flatMap((s) => {
      const k = this.keys(s);
      return [k.next, k.records];
    });
    return parseScheduleLook(
      await this.conn.streamsScheduleLook(keys.length, ...keys, horizonMs, budget.schedules, budget.bytes, MAX_SCHEDULE_RECORD_BYTES),
      streams.length,
    );
  }

  /** Fires (or skips) schedules of `stream`, each only if still as the look found it; per order whether it was done. */
  async fire(stream: string, orders: readonly FireOrder[]): Promise<FireOutcome[]> {
    if (orders.length === 0) return [];
    const args = orders.flatMap((o) => [o.id, String(o.at), o.rev, o.action, o.next === undefined ? '' : String(o.next)]);
    return parseFireReply(await this.conn.streamsScheduleFire(...this.fiveKeys(stream), ...args), orders.length);
  }

  async state(stream: string, id: string): Promise<ScheduleState> {
    const k = this.keys(stream);
    return parseScheduleState(await this.conn.streamsScheduleState(k.records, k.fired, id));
  }

  /** Writes `record` with its next fire: `ifCancelled` when a future fire was taken back, else `otherwise`; applied only while the last fire is `lastFire`. */
  async set(
    stream: string,
    id: string,
    record: string,
    lastFire: string,
    ifCancelled: number | undefined,
    otherwise: number | undefined,
  ): Promise<ScheduleSetReply> {
    const ms = (n: number | undefined) => (n === undefined ? '' : String(n));
    return parseScheduleSet(
      await this.conn.streamsScheduleSet(...this.fiveKeys(stream), id, record, lastFire, ms(ifCancelled), ms(otherwise)),
    );
  }

  async remove(stream: string, id: string): Promise<{ existed: boolean; cancelled: boolean }> {
    return parseScheduleRemove(await this.conn.streamsScheduleRemove(...this.fiveKeys(stream), id));
  }

  /** A page of `stream`'s schedules (HSCAN from `cursor`, about `count`). */
  async page(stream: string, cursor: string, count: number): Promise<SchedulePage> {
    const k = this.keys(stream);
    return parseSchedulePage(await this.conn.streamsScheduleList(k.records, k.next, k.fired, cursor, count));
  }

  async get(stream: string, id: string): Promise<{ now: number; schedule: StoredSchedule | undefined }> {
    const k = this.keys(stream);
    return parseScheduleGet(await this.conn.streamsScheduleGet(k.records, k.next, k.fired, id), id);
  }
}
