import { delayedKeysOf, idempotencyKeyOf, idempotencyKeyPrefixOf, type DelayedKeys } from '../../key-names.js';
import type { RedisConnection } from '../connection/connect.js';
import type { RawCommand } from '../produce/replication-wait.js';
import { CANCEL_SCRIPT, LOOK_SCRIPT, PROMOTE_SCRIPT, SCHEDULE_SCRIPT } from './delayed-scripts.js';
import { encodeRecord } from './delayed-record.js';
import type { OnceWrite } from '../produce/idempotent-add.js';
import { parseDelayedLook, parsePromoteReply, parseScheduleReply, type DelayedLook, type Promotion } from '../replies/replies.js';
import { defineLuaScripts, luaScript, rawEval, type LuaScript } from '../lua/lua-script.js';
import { ScheduleCommands } from './schedule-commands.js';

// Schedule and promote take their key count from the call.
const SCHEDULE = luaScript('streamsSchedule', undefined, SCHEDULE_SCRIPT);
const DELAYED_SCRIPTS: readonly LuaScript[] = [
  SCHEDULE,
  luaScript('streamsPromote', undefined, PROMOTE_SCRIPT),
  luaScript('streamsCancel', 3, CANCEL_SCRIPT),
  luaScript('streamsDelayedLook', 2, LOOK_SCRIPT),
];

/** When a delayed entry is due: `in` ms from now, or `at` a Unix time in ms (both on Redis' clock). */
export type DueTime = { in: number } | { at: number };

/** What one promotion call moves at most: a short script keeps every other client's wait short. */
export interface PromoteBudget {
  entries: number;
  /** Bytes of records; the first entry of a call moves whatever its size. */
  bytes: number;
}

/**
 * A worker's budget per promotion call, for all of a reader's streams together: 100 entries of 2 MB in
 * one script held Redis for seconds; in calls of 1 MB each other client waits for one call at most.
 */
export const PROMOTE_BUDGET: PromoteBudget = { entries: 100, bytes: 1_000_000 };

type Variadic = (keyCount: number, ...keysThenArgs: (string | number | Buffer)[]) => Promise<unknown>;
type DelayedConnection = RedisConnection & {
  /** Variadic keys: their count first, then the keys, then the arguments (see the scripts). */
  streamsSchedule: Variadic;
  streamsPromote: Variadic;
  streamsCancel(schedule: string, entries: string, idmpKey: string, id: string, prefix: string): Promise<unknown>;
  streamsDelayedLook(schedule: string, entries: string): Promise<unknown>;
};

/** Delayed delivery's commands (the scripts of delayed-scripts.ts), for producers, workers and tools alike. */
export class DelayedCommands {
  private readonly conn: DelayedConnection;
  /** The repeatable schedules that feed this path (their fires are delayed entries): a worker's promoter fires them too. */
  readonly schedules: ScheduleCommands;

  constructor(
    conn: RedisConnection,
    private readonly onCluster: boolean,
  ) {
    defineLuaScripts(conn, DELAYED_SCRIPTS);
    this.conn = conn as DelayedConnection;
    this.schedules = new ScheduleCommands(conn, onCluster);
  }

  keys(stream: string): DelayedKeys {
    return delayedKeysOf(stream, this.onCluster);
  }

  /**
   * Schedules entry `id` of `stream` (its fields) for `due`; an id already waiting stays as it was (`scheduled: false`).
   * With `once` (an idempotency key) a key held by another write (within its window, or waiting) schedules nothing.
   */
  async schedule(
    stream: string,
    id: string,
    fields: readonly string[],
    due: DueTime,
    once?: OnceWrite,
  ): Promise<{ scheduled: boolean; dueAt: number }> {
    const k = this.keys(stream);
    const [mode, ms] = 'in' in due ? (['in', due.in] as const) : (['at', due.at] as const);
    if (!once) return parseScheduleReply(await this.conn.streamsSchedule(2, k.schedule, k.entries, mode, ms, id, encodeRecord(fields)));
    const idmpKey = idempotencyKeyOf(stream, once.producerId, once.key, once.onCluster);
    const record = encodeRecord(fields, { ...once, idmpKey });
    return parseScheduleReply(
      await this.conn.streamsSchedule(3, k.schedule, k.entries, idmpKey, mode, ms, id, record, once.key, once.windowSec),
    );
  }

  /** `schedule` as a raw command, for a durable write's pipeline (durable-writes.ts); its reply reads with parseScheduleReply. */
  scheduleCommand(stream: string, id: string, fields: readonly string[], due: DueTime, once?: OnceWrite): RawCommand {
    const k = this.keys(stream);
    const [mode, ms] = 'in' in due ? (['in', due.in] as const) : (['at', due.at] as const);
    if (!once) return rawEval(SCHEDULE, [k.schedule, k.entries, mode, ms, id, encodeRecord(fields)], 2);
    const idmpKey = idempotencyKeyOf(stream, once.producerId, once.key, once.onCluster);
    const record = encodeRecord(fields, { ...once, idmpKey });
    return rawEval(SCHEDULE, [k.schedule, k.entries, idmpKey, mode, ms, id, record, once.key, once.windowSec], 3);
  }

  /**
   * Moves what is due of each stream into it, within `budget` for the whole call (a number: that many
   * entries, PROMOTE_BUDGET's bytes); see PROMOTE_SCRIPT; on a cluster the streams share a slot. A
   * promotion whose `more` is set wants another call at once.
   */
  async promote(streams: readonly string[], budget: PromoteBudget | number = PROMOTE_BUDGET): Promise<Promotion[]> {
    if (typeof budget === 'number') budget = { entries: budget, bytes: PROMOTE_BUDGET.bytes };
    const keys = streams.flatMap((stream) => {
      const k = this.keys(stream);
      return [k.schedule, k.entries, stream];
    });
    const prefixes = streams.map((stream) => idempotencyKeyPrefixOf(stream, this.onCluster));
    return parsePromoteReply(
      await this.conn.streamsPromote(keys.length, ...keys, budget.entries, budget.bytes, ...prefixes),
      streams.length,
    );
  }

  /**
   * Cancels waiting entry `id` of `stream` (the id emit gave: with an idempotency key, that key, looked up
   * under `producerId`): true if it was waiting (false: promoted already, cancelled, or never there).
   */
  async cancel(stream: string, id: string, producerId = 'nestjs-redis-streams'): Promise<boolean> {
    const k = this.keys(stream);
    const idmpKey = idempotencyKeyOf(stream, producerId, id, this.onCluster);
    const prefix = idempotencyKeyPrefixOf(stream, this.onCluster);
    return Number(await this.conn.streamsCancel(k.schedule, k.entries, idmpKey, id, prefix)) === 1;
  }

  /** How many entries of `stream` wait, the ms until the next is due (negative: past due, nobody moved it in), and the values no schedule names. */
  async look(stream: string): Promise<DelayedLook> {
    const k = this.keys(stream);
    return parseDelayedLook(await this.conn.streamsDelayedLook(k.schedule, k.entries));
  }
}
