import { BehaviorSubject, filter, take, type Observable } from 'rxjs';

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
  // Plain fields, read per entry on the hot path.
  private isStopped = false;
  private isAbandoned = false;

  get stopped(): boolean {
    return this.isStopped;
  }

  get abandoned(): boolean {
    return this.isAbandoned;
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
