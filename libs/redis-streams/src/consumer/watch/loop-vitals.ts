import { describeError } from '../../describe-error.js';
import { isErrorReply, isRetryable } from '../../redis/replies/redis-errors.js';
import type { StreamHandlers } from './stuck-watch.js';

/** What each step of the loop emits once it succeeded: the groups checked, or entries fetched (and settled) by one of the fetchers. */
export interface StepResult {
  readonly step: 'groups' | 'drain' | 'reclaim' | 'park' | 'standby';
  /** Entries the step fetched. */
  readonly fetched: number;
}

/** How a loop is doing, for health checks. */
export interface LoopVitals {
  /** When a step of the loop last succeeded (its groups checked, a read, a reclaim, a beat); undefined before the first. */
  lastBeatAt: number | undefined;
  /** Since when the loop's Redis calls fail for want of Redis (connection, timeout) without a success in between; undefined while they succeed. */
  failingSince: number | undefined;
  /** Redis answers but refuses the loop's calls (WRONGTYPE, NOPERM…: needs a human, not a restart): the last refusal, until a success. */
  refusal: string | undefined;
  /** Entries fetched and not yet settled, per stream. */
  inHand: Map<string, number>;
  /** Per stream with a handler running: the oldest, and how many are past `stuckEntryMs`. */
  handlers: Map<string, StreamHandlers>;
}

/** A loop's vitals, kept from what its pipeline emits: each step's result, and each failure before a retry. */
export class VitalSigns {
  private lastBeatAt: number | undefined;
  private failingSince: number | undefined;
  private refusal: string | undefined;

  constructor(private readonly onCluster: boolean | undefined) {}

  /** A step succeeded: the loop beats, and Redis answers. */
  stepped(): void {
    this.lastBeatAt = Date.now();
    this.failingSince = undefined;
    this.refusal = undefined;
  }

  failed(error: unknown): void {
    // An error reply proves Redis is reachable: only a missing answer counts toward "unreachable".
    if (!isErrorReply(error)) this.failingSince ??= Date.now();
    else {
      this.failingSince = undefined;
      if (!isRetryable(error, this.onCluster)) this.refusal = describeError(error);
    }
  }

  read(inHand: Map<string, number>, handlers: Map<string, StreamHandlers>): LoopVitals {
    return { lastBeatAt: this.lastBeatAt, failingSince: this.failingSince, refusal: this.refusal, inHand, handlers };
  }
}
