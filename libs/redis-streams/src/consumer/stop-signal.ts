import { BehaviorSubject, filter, take, type Observable } from 'rxjs';
import type { Logger } from '../ports.js';
import { within } from '../within.js';

/**
 * How long the steps after the handlers (hand-backs, the last acks) may wait on Redis, all
 * together, once stopping: a frozen server must not hold close() for commandTimeoutMs per step.
 */
export const STOP_STEPS_WITHIN_MS = 2000;

const NOTHING = (): void => undefined;

/** Why a loop stops: `stopping` finishes what is in hand; `abandoned` (close() gave up waiting) lets nothing late count. */
export type StopReason = 'stopping' | 'abandoned';

/**
 * A loop's one stop signal: every step checks `stopped` between entries and reads, and waits
 * (gate, backoff, connecting) end when `stopped$` emits. Stopping is for good; abandoning is
 * stopping that also drops whatever finishes late.
 */
export class StopSignal {
  private readonly reason$ = new BehaviorSubject<StopReason | undefined>(undefined);
  /** Emits once stopping has begun, at once to a late subscriber. */
  readonly stopped$: Observable<StopReason> = this.reason$.pipe(
    filter((r): r is StopReason => r !== undefined),
    take(1),
  );
  /** Emits once abandoning has begun (close() gave up waiting): nothing of the loop's upkeep runs after. */
  readonly abandoned$: Observable<StopReason> = this.reason$.pipe(
    filter((r): r is StopReason => r === 'abandoned'),
    take(1),
  );
  // Plain fields, read per entry on the hot path.
  private isStopped = false;
  private isAbandoned = false;
  /** performance.now() by which every step after the handlers must be done; set by the first. */
  private stepsDeadline: number | undefined;

  get stopped(): boolean {
    return this.isStopped;
  }

  get abandoned(): boolean {
    return this.isAbandoned;
  }

  /**
   * `work` (a Redis step after the handlers); once stopping, waited for only until the shared
   * deadline, then logged as `what … not confirmed` and left (its entries stay pending). Its
   * failure still rejects.
   */
  bounded(work: Promise<unknown>, what: () => string, logger: Logger): Promise<void> {
    // Not stopping (once per batch): the work itself, no frame of its own.
    if (!this.isStopped) return work.then(NOTHING);
    return this.boundedByDeadline(work, what, logger);
  }

  private async boundedByDeadline(work: Promise<unknown>, what: () => string, logger: Logger): Promise<void> {
    this.stepsDeadline ??= performance.now() + STOP_STEPS_WITHIN_MS;
    const confirmed = work.then(() => true);
    confirmed.catch(() => {}); // a late failure, after the deadline, is nobody's to handle
    if (!(await within(confirmed, this.stepsDeadline - performance.now(), false)))
      logger.warn(`${what()} not confirmed by Redis within ${STOP_STEPS_WITHIN_MS} ms of stopping: left pending under this consumer`);
  }

  /** Signals `reason`; false when the loop was stopping already (abandoning still upgrades it). */
  stop(reason: StopReason): boolean {
    const first = !this.isStopped;
    this.isStopped = true;
    if (reason === 'abandoned') this.isAbandoned = true;
    if (this.reason$.value !== 'abandoned') this.reason$.next(reason);
    return first;
  }
}
