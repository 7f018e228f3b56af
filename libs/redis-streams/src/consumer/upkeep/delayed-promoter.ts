import { defer, EMPTY, first, from, merge, type Observable, race, repeat, Subject, timer } from 'rxjs';
import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';
import { PROMOTE_BUDGET, type DelayedCommands } from '../../redis/upkeep/delayed-commands.js';
import { isNoPermission, isRetryable } from '../../redis/replies/redis-errors.js';
import type { Promotion } from '../../redis/replies/replies.js';
import { ScheduleFirer } from './schedule-firer.js';

/** Promotion scripts in one look; past it the next look comes at once (on a timer: the reader's other work goes between). */
const ROUNDS_PER_LOOK = 20;

export interface DelayedView {
  /** Entries waiting in the stream's schedule, at the last look. */
  waiting: number;
  /** Ms until the next is due, by the last look; undefined when none waits. */
  nextDueInMs: number | undefined;
}

export interface PromoterDeps {
  delayed: DelayedCommands;
  streams: readonly string[];
  /** Longest wait between two looks (`flowCheckMs`): what was scheduled since the last look is found then. */
  checkMs: number;
  logger: Logger;
}

/**
 * Moves a reader's delayed entries into their streams when due (PROMOTE_SCRIPT: atomic, on Redis'
 * clock, so any number of workers promote each entry once). It looks again when the next known
 * entry is due, or after `checkMs` for ones scheduled since: every worker of the stream looks, so
 * one stopped or killed leaves nothing behind. A failed look is logged and tried at the next.
 */
export class DelayedPromoter {
  private readonly views = new Map<string, DelayedView & { at: number }>();
  private lastError = '';
  private lookFailed = false;
  private readonly refusals = new Map<string, string>();
  /** The repeatable schedules of the same streams, whose fires come into this schedule (none in a test's fake commands). */
  private readonly firer: ScheduleFirer | undefined;
  /** performance.now() of the next look as planned; a fire handed over due earlier wakes it (handedOver). */
  private wakeAt = Infinity;
  private readonly wake$ = new Subject<void>();
  /** Fires handed over, per stream the earliest due (performance.now() time): looked at then, whatever a look that raced with the hand-over saw. */
  private readonly expected = new Map<string, number>();
  /** performance.now() when the last look began. */
  private lookStartedAt = -Infinity;

  constructor(private readonly d: PromoterDeps) {
    const schedules = (d.delayed as Partial<DelayedCommands>).schedules;
    this.firer =
      schedules &&
      new ScheduleFirer({
        schedules,
        streams: d.streams,
        checkMs: d.checkMs,
        logger: d.logger,
        handedOver: (stream, inMs) => this.handedOver(stream, inMs),
      });
  }

  /** The looks, one after another, until unsubscribed (with the reader's upkeep); beside them the schedules' fires. */
  get looks$(): Observable<number> {
    const looks$ = defer(() => from(this.look())).pipe(
      repeat({
        delay: () => {
          const inMs = this.nextLookInMs();
          this.wakeAt = performance.now() + inMs;
          return race(timer(inMs), this.wake$.pipe(first()));
        },
      }),
    );
    return merge(looks$, this.firer?.looks$ ?? EMPTY);
  }

  /**
   * A schedule's fire was handed to `stream`'s schedule, due in `inMs`: the view knows it, and a look planned
   * later than that comes now (it then plans the next for the due time), so that the fire goes in on time.
   */
  private handedOver(stream: string, inMs: number): void {
    const at = performance.now() + inMs;
    if (at < (this.expected.get(stream) ?? Infinity)) this.expected.set(stream, at);
    const v = this.view(stream);
    if (!v || v.nextDueInMs === undefined || inMs < v.nextDueInMs)
      this.views.set(stream, { waiting: (v?.waiting ?? 0) + 1, nextDueInMs: inMs, at: Date.now() });
    if (performance.now() + inMs < this.wakeAt) this.wake$.next();
  }

  /** What waits in `stream`'s schedule, by the last look (undefined before one). */
  view(stream: string): DelayedView | undefined {
    const v = this.views.get(stream);
    if (!v) return undefined;
    const next = v.nextDueInMs === undefined ? undefined : Math.max(0, v.nextDueInMs - (Date.now() - v.at));
    return { waiting: v.waiting, nextDueInMs: next };
  }

  /** One look at every stream (one script call for all, again at once while one stopped inside its budget): what is due moves in. How many moved. */
  async look(): Promise<number> {
    this.lookStartedAt = performance.now();
    let moved = 0;
    let streams = this.d.streams;
    for (let round = 0; round < ROUNDS_PER_LOOK && streams.length > 0; round++) {
      let promotions: Promotion[];
      try {
        promotions = await this.d.delayed.promote(streams, PROMOTE_BUDGET);
        this.lastError = '';
      } catch (err) {
        // The views are stale now: the next look comes after checkMs, not when they say (again and again).
        this.lookFailed = true;
        this.failed(streams, err);
        return moved;
      }
      this.lookFailed = false;
      // The streams the budget did not reach go first in the next call: one stream with a large backlog does not starve the others.
      const unlooked: string[] = [];
      const more: string[] = [];
      promotions.forEach((p, i) => {
        const stream = streams[i]!;
        // Not reached by this call's budget: nothing is known of it but that it is the next call's.
        if (p.more === 'unlooked') return unlooked.push(stream);
        moved += p.moved;
        this.views.set(stream, { waiting: p.waiting, nextDueInMs: p.nextDueInMs, at: Date.now() });
        if (p.dropped > 0)
          this.d.logger.warn(
            `${p.dropped} delayed entries of "${stream}" had no fields (cancelled meanwhile, or a raw producer's ZADD alone): dropped`,
          );
        if (p.refused !== undefined) return this.refusedBy(stream, p.refused);
        this.refusals.delete(stream);
        // The budget ended inside it: more may be due now.
        if (p.more === 'stopped') more.push(stream);
      });
      streams = [...unlooked, ...more];
    }
    // More due than a look moves: the next look comes at once.
    for (const stream of streams) this.views.set(stream, { waiting: this.views.get(stream)?.waiting ?? 0, nextDueInMs: 0, at: Date.now() });
    return moved;
  }

  /** The next look: when the earliest known entry is due, at most `checkMs` away. */
  private nextLookInMs(): number {
    let next = this.d.checkMs;
    if (this.lookFailed) return next;
    const now = performance.now();
    for (const [stream, at] of this.expected) {
      // A look that began at or after its due time saw it.
      if (at <= this.lookStartedAt) this.expected.delete(stream);
      else next = Math.min(next, Math.max(0, at - now));
    }
    for (const stream of this.d.streams) {
      // A stream refusing its due entry is tried at the next look, not at once (again and again).
      if (this.refusals.has(stream)) continue;
      const due = this.view(stream)?.nextDueInMs;
      if (due !== undefined && due < next) next = due;
    }
    return next;
  }

  /**
   * A stream whose due entries cannot go in (it refused one: another type, out of memory; a schedule key of
   * another type; an idempotency key's record it may not read): said once per stream and reason; they wait.
   */
  private refusedBy(stream: string, why: string): void {
    if (this.refusals.get(stream) === why) return;
    this.refusals.set(stream, why);
    this.d.logger.error(
      `delayed entries of "${stream}" cannot be moved in: ${escapeControl(why)}; they wait, and are tried again at every look`,
    );
  }

  /**
   * A refusal (an ACL without the schedule's rights) is an error, said once: the entries wait until someone
   * grants them. A lost connection is the connection report's to tell; anything else is said once per kind.
   */
  private failed(streams: readonly string[], err: unknown): void {
    if (isRetryable(err)) return;
    const said = describeError(err);
    if (said === this.lastError) return;
    this.lastError = said;
    const told = `could not move the due delayed entries of "${streams[0]}"${streams.length > 1 ? ` and ${streams.length - 1} more streams` : ''} into them: ${said}`;
    if (isNoPermission(err))
      this.d.logger.error(
        `${told}; the consumer needs rights on the streams' schedule keys (docs/guide/security.md); tried again at every look`,
      );
    else this.d.logger.error(`${told}; tried again at the next look`);
  }
}
