import { Cron } from 'croner';

/**
 * When a repeatable schedule fires (docs/guide/schedules.md): every `every` ms, or at the times of a cron
 * expression in an IANA time zone, from `startAt` (inclusive) to `endAt` (inclusive). Pure: the times are
 * computed here, in JS, from a "now" that is always Redis' clock (the scripts' TIME), never the host's.
 *
 * Cron expressions are croner's (https://github.com/hexagon/croner, zero dependencies, time zones through
 * Intl): 5 fields, or 6 with seconds first. Across DST it follows Vixie cron, as croner does: a local time
 * the spring-forward skips fires at the moment of the jump (02:30 on the day Berlin goes from 02:00 to 03:00
 * fires at 03:00 CEST); a fixed local time that occurs twice at fall-back fires once, at the first (CEST);
 * a wildcard or stepped hour (every 15 minutes: a step of 15 in the minute field, any hour) runs on real
 * time, so through both passes of the repeated hour.
 */
export type ScheduleTiming = { every: number } | { cron: string; tz?: string };

export interface ScheduleTimes {
  timing: ScheduleTiming;
  /** Unix ms: no fire before it (an `every` schedule fires at startAt + k × every). */
  startAt?: number;
  /** Unix ms: no fire after it; the schedule is removed once its last fire is handed over. */
  endAt?: number;
}

/** What to do with a fire found late: `once` fires it (late) and then the next one after now; `skip` fires nothing and schedules the next one after now. */
export type CatchUp = 'once' | 'skip';

/**
 * A fire found later than this (no worker was looking: every worker down, or all far behind) is **missed**:
 * `catchUp` decides. Closer than this it is only late (a worker's look, a busy Redis) and fires as usual.
 */
export const MISSED_AFTER_MS = 5_000;

/** A schedule's fire is handed to the stream's delayed schedule this long before it is due, so that it goes in at its time. */
export const FIRE_LOOKAHEAD_MS = 1_000;

/** croner's mode: 5 fields, or 6 with seconds first. */
const CRON_MODE = '5-or-6-parts' as const;

const crons = new Map<string, Cron>();

/** A parsed cron (paused: it only computes times), cached per expression and zone. Throws on a bad one (croner's message). */
export function cronOf(expression: string, tz: string | undefined): Cron {
  const key = `${tz ?? ''}\n${expression}`;
  let cron = crons.get(key);
  if (!cron) {
    cron = new Cron(expression, { paused: true, mode: CRON_MODE, ...(tz === undefined ? {} : { timezone: tz }) });
    if (crons.size >= 1_000) crons.clear();
    crons.set(key, cron);
  }
  return cron;
}

/** The schedule's first fire strictly after `after` (Unix ms), at or after startAt and at or before endAt; undefined when none is left. */
export function nextFireAfter(times: ScheduleTimes, after: number): number | undefined {
  const { timing, startAt, endAt } = times;
  let next: number | undefined;
  if ('every' in timing) {
    const anchor = startAt ?? 0;
    next = after < anchor ? anchor : anchor + (Math.floor((after - anchor) / timing.every) + 1) * timing.every;
  } else {
    // nextRun is strictly after its reference; startAt is inclusive.
    const ref = startAt !== undefined && startAt - 1 > after ? startAt - 1 : after;
    next = cronOf(timing.cron, timing.tz).nextRun(new Date(ref))?.getTime();
  }
  if (next === undefined || (endAt !== undefined && next > endAt)) return undefined;
  return next;
}

/** What a worker does with a schedule whose fire time `fire` came (`now`: Redis' clock). */
export interface FireDecision {
  /** Hand the fire over (an entry due at `fire`), or skip it. */
  fire: boolean;
  /** The next fire time; undefined: none is left (past endAt), the schedule ends. */
  next: number | undefined;
}

/**
 * A fire on time (or late by at most MISSED_AFTER_MS) fires, and the next one is the one after it. A missed
 * one fires once, late (`once`), or not at all (`skip`), and the next one is the first after `now`: however
 * many fell due while no worker looked, at most one of them fires.
 */
export function fireDecision(times: ScheduleTimes, catchUp: CatchUp, fire: number, now: number): FireDecision {
  if (times.endAt !== undefined && fire > times.endAt) return { fire: false, next: undefined };
  if (now - fire > MISSED_AFTER_MS) return { fire: catchUp === 'once', next: nextFireAfter(times, now) };
  return { fire: true, next: nextFireAfter(times, fire) };
}
