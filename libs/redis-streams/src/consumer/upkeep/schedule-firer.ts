import { defer, from, type Observable, repeat, timer } from 'rxjs';
import { decodeScheduleRecord } from '../../codec/schedule-record.js';
import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';
import { isNoPermission, isRetryable } from '../../redis/replies/redis-errors.js';
import type { ScheduleLook } from '../../redis/replies/schedule-replies.js';
import type { FireOrder, ScheduleCommands } from '../../redis/upkeep/schedule-commands.js';
import { FIRE_LOOKAHEAD_MS, fireDecision, type ScheduleTimes } from '../../schedule-times.js';

/** Looks in one round (a look, then its fires); past it the next round comes at once, on a timer. */
const ROUNDS_PER_LOOK = 20;

export interface FirerDeps {
  schedules: ScheduleCommands;
  streams: readonly string[];
  /** Longest wait between two looks (`flowCheckMs`): a schedule set since the last look is found then. */
  checkMs: number;
  logger: Logger;
  /** A fire was handed to `stream`'s delayed schedule, due in `inMs` (Redis' clock): the promoter looks then. */
  handedOver(stream: string, inMs: number): void;
}

/**
 * Fires a reader's streams' repeatable schedules (docs/guide/schedules.md): it looks at what falls due within
 * FIRE_LOOKAHEAD_MS by Redis' clock, computes each fire's next (croner, schedule-times.ts) and hands the fire to
 * the stream's delayed schedule, due at its time, in one script per stream that checks the schedule is still as it
 * read it (ScheduleCommands.fire): any number of workers fire each fire once. It looks again when the next
 * schedule comes within the lookahead, or after `checkMs` for ones set since. A failed look is logged and tried at
 * the next.
 */
export class ScheduleFirer {
  private nextInMs: number | undefined;
  private lookFailed = false;
  private lastError = '';
  private readonly told = new Map<string, string>();

  constructor(private readonly d: FirerDeps) {}

  /** The looks, one after another, until unsubscribed. */
  get looks$(): Observable<number> {
    return defer(() => from(this.look())).pipe(repeat({ delay: () => timer(this.nextLookInMs()) }));
  }

  /** One round: looks and fires until nothing due is left within the budget of ROUNDS_PER_LOOK calls. How many fires it handed over. */
  async look(): Promise<number> {
    let fired = 0;
    let streams = this.d.streams;
    this.nextInMs = undefined;
    for (let round = 0; round < ROUNDS_PER_LOOK && streams.length > 0; round++) {
      let look: ScheduleLook;
      try {
        look = await this.d.schedules.look(streams, FIRE_LOOKAHEAD_MS);
        const again: string[] = [];
        const work: Promise<number>[] = [];
        look.rows.forEach((row, i) => {
          const stream = streams[i]!;
          if (row.more === 'unlooked') return again.push(stream);
          if (row.refused !== undefined) return this.tell(stream, row.refused);
          if (row.more === 'stopped') again.push(stream);
          if (row.nextInMs !== undefined) this.soonest(row.nextInMs - FIRE_LOOKAHEAD_MS);
          if (row.due.length > 0) work.push(this.fire(stream, row.due, look.now));
        });
        // Each stream's fires are one script: sent together (one round trip for all).
        for (const n of await Promise.all(work)) fired += n;
        this.lastError = '';
        this.lookFailed = false;
        streams = again;
      } catch (err) {
        this.lookFailed = true;
        this.failed(err);
        return fired;
      }
    }
    if (streams.length > 0) this.nextInMs = 0;
    return fired;
  }

  /** The fires (and skips) of one stream's due schedules; how many entries it handed over. */
  private async fire(stream: string, due: ScheduleLook['rows'][number]['due'], now: number): Promise<number> {
    const orders: FireOrder[] = [];
    for (const s of due) {
      if (s.record === '') {
        orders.push({ id: s.id, at: s.at, rev: '', action: 'drop', next: undefined });
        continue;
      }
      const r = decodeScheduleRecord(s.record);
      if (!r) {
        // Damaged (the look passes a later version's over): parked out of every look's range, never fired, until a set.
        this.tell(
          `${stream}\n${s.id}`,
          `schedule "${escapeControl(s.id)}" of "${escapeControl(stream)}" has a record this version cannot read (damaged, or too large): it does not fire, and is listed as unreadable until a set replaces it`,
        );
        orders.push({ id: s.id, at: s.at, rev: '', action: 'park', next: undefined });
        continue;
      }
      const times: ScheduleTimes = {
        timing: r.cron === undefined ? { every: r.every! } : { cron: r.cron, ...(r.tz === undefined ? {} : { tz: r.tz }) },
        ...(r.startAt === undefined ? {} : { startAt: r.startAt }),
        ...(r.endAt === undefined ? {} : { endAt: r.endAt }),
      };
      let decision;
      try {
        decision = fireDecision(times, r.catchUp, s.at, now);
      } catch (err) {
        decision = undefined;
        this.tell(
          `${stream}\n${s.id}`,
          `schedule "${escapeControl(s.id)}" of "${escapeControl(stream)}": its next fire cannot be computed (${describeError(err)}): it does not fire, until a set replaces it`,
        );
      }
      // A next fire that is no time after this one would fire this one again and again: parked instead.
      if (!decision || (decision.next !== undefined && (!Number.isSafeInteger(decision.next) || decision.next <= s.at))) {
        orders.push({ id: s.id, at: s.at, rev: '', action: 'park', next: undefined });
        continue;
      }
      orders.push({ id: s.id, at: s.at, rev: r.rev, action: decision.fire ? 'fire' : 'skip', next: decision.next });
    }
    const outcomes = await this.d.schedules.fire(stream, orders);
    let handed = 0;
    let earliest = Infinity;
    outcomes.forEach((outcome, i) => {
      const o = orders[i]!;
      // Behind its last fire: looked at again once that one is due.
      if (!outcome.done && outcome.waitMs !== undefined) this.soonest(outcome.waitMs);
      if (!outcome.done) return;
      // Its next fire may fall within the lookahead already (a short `every`).
      if (o.next !== undefined) this.soonest(o.next - now - FIRE_LOOKAHEAD_MS);
      if (o.action !== 'fire') return;
      handed++;
      earliest = Math.min(earliest, o.at);
    });
    if (handed > 0) this.d.handedOver(stream, Math.max(0, earliest - now));
    return handed;
  }

  /** The next look comes `inMs` from now at the latest. */
  private soonest(inMs: number): void {
    this.nextInMs = Math.min(this.nextInMs ?? Infinity, inMs);
  }

  /** The next look: when the next schedule comes within the lookahead, at most `checkMs` away. */
  private nextLookInMs(): number {
    if (this.lookFailed || this.nextInMs === undefined) return this.d.checkMs;
    return Math.max(0, Math.min(this.d.checkMs, this.nextInMs));
  }

  /** Said once per subject and reason: the schedules wait. */
  private tell(subject: string, why: string): void {
    if (this.told.get(subject) === why) return;
    this.told.set(subject, why);
    if (this.told.size > 1_000) this.told.clear();
    this.d.logger.error(subject.includes('\n') ? why : `the schedules of "${escapeControl(subject)}" cannot fire: ${escapeControl(why)}`);
  }

  private failed(err: unknown): void {
    if (isRetryable(err)) return;
    const said = describeError(err);
    if (said === this.lastError) return;
    this.lastError = said;
    const streams = this.d.streams;
    const told = `could not fire the schedules of "${streams[0]}"${streams.length > 1 ? ` and ${streams.length - 1} more streams` : ''}: ${said}`;
    if (isNoPermission(err))
      this.d.logger.error(
        `${told}; the consumer needs rights on the streams' schedule keys (docs/guide/security.md); tried again at every look`,
      );
    else this.d.logger.error(`${told}; tried again at the next look`);
  }
}
