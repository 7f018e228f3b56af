import { delayedKeysOf, type DelayedKeys } from '../key-names.js';
import type { RedisConnection } from './connect.js';
import { CANCEL_SCRIPT, LOOK_SCRIPT, PROMOTE_SCRIPT, SCHEDULE_SCRIPT } from './delayed-scripts.js';
import { parseDelayedLook, parsePromoteReply, parseScheduleReply, type Promotion } from './replies.js';

/** `value` with each lone surrogate made U+FFFD (String.prototype.toWellFormed, ES2024). */
const wellFormed = (value: string): string =>
  value.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

/** When a delayed entry is due: `in` ms from now, or `at` a Unix time in ms (both on Redis' clock). */
export type DueTime = { in: number } | { at: number };

type DelayedConnection = RedisConnection & {
  streamsSchedule(schedule: string, entries: string, mode: 'in' | 'at', ms: number, id: string, fields: string): Promise<unknown>;
  /** Variadic keys: their count first, then per stream its schedule, entries and stream, then `max`. */
  streamsPromote(keyCount: number, ...keysThenMax: (string | number)[]): Promise<unknown>;
  streamsCancel(schedule: string, entries: string, id: string): Promise<unknown>;
  streamsDelayedLook(schedule: string): Promise<unknown>;
};

/** Delayed delivery's commands (the scripts of delayed-scripts.ts), for producers, workers and tools alike. */
export class DelayedCommands {
  private readonly conn: DelayedConnection;

  constructor(
    conn: RedisConnection,
    private readonly onCluster: boolean,
  ) {
    conn.defineCommand('streamsSchedule', { numberOfKeys: 2, lua: SCHEDULE_SCRIPT });
    conn.defineCommand('streamsPromote', { lua: PROMOTE_SCRIPT });
    conn.defineCommand('streamsCancel', { numberOfKeys: 2, lua: CANCEL_SCRIPT });
    conn.defineCommand('streamsDelayedLook', { numberOfKeys: 1, lua: LOOK_SCRIPT });
    this.conn = conn as DelayedConnection;
  }

  keys(stream: string): DelayedKeys {
    return delayedKeysOf(stream, this.onCluster);
  }

  /** Schedules entry `id` of `stream` (its fields) for `due`; an id already waiting stays as it was (`scheduled: false`). */
  async schedule(stream: string, id: string, fields: readonly string[], due: DueTime): Promise<{ scheduled: boolean; dueAt: number }> {
    const k = this.keys(stream);
    const [mode, ms] = 'in' in due ? (['in', due.in] as const) : (['at', due.at] as const);
    // A lone surrogate would be a JSON escape Lua's cjson refuses: made U+FFFD, as a plain XADD of it writes.
    const json = JSON.stringify(fields.map(wellFormed));
    return parseScheduleReply(await this.conn.streamsSchedule(k.schedule, k.entries, mode, ms, id, json));
  }

  /** Moves up to `max` due entries of each stream into it, in one call (see PROMOTE_SCRIPT; on a cluster the streams share a slot). */
  async promote(streams: readonly string[], max: number): Promise<Promotion[]> {
    const keys = streams.flatMap((stream) => {
      const k = this.keys(stream);
      return [k.schedule, k.entries, stream];
    });
    return parsePromoteReply(await this.conn.streamsPromote(keys.length, ...keys, max), streams.length);
  }

  /** Cancels waiting entry `id` of `stream`: true if it was waiting (false: promoted already, cancelled, or never there). */
  async cancel(stream: string, id: string): Promise<boolean> {
    const k = this.keys(stream);
    return Number(await this.conn.streamsCancel(k.schedule, k.entries, id)) === 1;
  }

  /** How many entries of `stream` wait, and the ms until the next is due (negative: past due, nobody moved it in). */
  async look(stream: string): Promise<{ waiting: number; nextDueInMs: number | undefined }> {
    return parseDelayedLook(await this.conn.streamsDelayedLook(this.keys(stream).schedule));
  }
}
