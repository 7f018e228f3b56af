import { backoffMs } from '../backoff.js';
import {
  concat,
  concatMap,
  defer,
  EMPTY,
  finalize,
  from,
  ignoreElements,
  map,
  type Observable,
  of,
  repeat,
  retry,
  takeUntil,
  tap,
  timer,
} from 'rxjs';
import { describeError } from '../describe-error.js';
import { isRetryable } from '../redis/redis-errors.js';
import { within } from '../within.js';
import { GroupKeeper } from './group-keeper.js';
import { loopParts, type ConsumerLoopDeps, type LoopParts } from './loop-parts.js';
import { VitalSigns, type LoopVitals, type StepResult } from './loop-vitals.js';
import { Parker } from './parker.js';
import { Reclaimer } from './reclaimer.js';
import { selfDrain$ } from './self-drain.js';
import { StopSignal } from './stop-signal.js';
import { StuckWatch, type Running } from './stuck-watch.js';

export type { ConsumerLoopDeps } from './loop-parts.js';
export type { LoopVitals, StepResult } from './loop-vitals.js';

/** How long abandoning may wait on Redis to take entries back after a hung handler. */
const HAND_BACK_WITHIN_MS = 1000;

const NEXT_BEAT = of(0);
const GROUPS_READY: StepResult = { step: 'groups', fetched: 0 };

/**
 * One consumer's loop, an RxJS pipeline of named steps:
 *   groups$      the consumer groups exist (created, or rejoined after a loss)
 *   selfDrain$   XREADGROUP … STREAMS k… 0 until empty (own un-acked work, at once)
 *   beat$        every beat: check$ (what acks and audit found) → reclaim$ (XAUTOCLAIM of idle
 *                peer entries, own retries) → park$ (XREADGROUP BLOCK … >, with read-ahead)
 * Each fetched batch is settled `concurrency` entries at a time and acked in one round trip.
 * One stop signal ends every step: `stop()` is honoured between entries only. Each step's
 * result keeps the vitals (health reads them). Any Redis failure restarts the pipeline (groups
 * re-created, own PEL re-drained) after a backoff.
 */
export class ConsumerLoop {
  private readonly stopSignal = new StopSignal();
  private readonly parts: LoopParts;
  private readonly keeper: GroupKeeper;
  private readonly parker: Parker;
  private readonly reclaimer: Reclaimer;
  private readonly vitalSigns: VitalSigns;
  private readonly watch: StuckWatch;

  constructor(private readonly d: ConsumerLoopDeps) {
    this.parts = loopParts(d, this.stopSignal, {
      groupLost: (stream) => {
        this.keeper.groupLost(stream);
        this.parker.wakePark();
      },
      shortAck: (stream, entries, missing) => {
        this.keeper.shortAck(stream, entries, missing);
        this.parker.wakePark();
      },
      ackFailed: () => {
        // The next beat flushes it (and restarts): wake a park rather than wait for a batch that may never come.
        this.keeper.ackFailedNow();
        this.parker.wakePark();
      },
      wake: () => this.parker.wakePark(),
    });
    this.parker = new Parker(this.parts, () => this.reclaimer.busy);
    this.reclaimer = new Reclaimer(this.parts);
    this.keeper = new GroupKeeper(this.parts, () => this.parker.dropAhead());
    this.vitalSigns = new VitalSigns(d.onCluster);
    this.watch = new StuckWatch(this.parts.inProgress, d.options.stuckEntryMs, d.options.consumer, d.logger);
  }

  /** Full keys of the streams this loop reads. */
  get streams(): readonly string[] {
    return this.d.streams;
  }

  /** Emits the number of entries each step fetched; completes after `stop()`. */
  run(): Observable<number> {
    const { stopped$ } = this.stopSignal;
    const groups$ = defer(() => this.keeper.ensureGroups()).pipe(map(() => GROUPS_READY));
    // Stopped before the gate opened (close() during the start): the gate never opens, go straight to finish.
    const gate$ = defer(() => from(this.d.started ?? Promise.resolve())).pipe(takeUntil(stopped$));
    const check$ = defer(() => (this.keeper.due ? from(this.keeper.checkGroups()).pipe(ignoreElements()) : EMPTY));
    const fullBeat$ = concat(check$, this.reclaimer.step$, this.parker.step$);
    // Under load check$ and reclaim$ have nothing to do: the beat is the park alone (no concat per batch).
    const beat$ = defer(() => (this.keeper.due || this.reclaimer.due ? fullBeat$ : this.parker.step$));
    const beats$ = beat$.pipe(repeat({ delay: () => (this.stopSignal.stopped ? EMPTY : NEXT_BEAT) }));
    const steps$ = concat(groups$, gate$.pipe(concatMap(() => concat(selfDrain$(this.parts), beats$))));
    const loop$ = steps$.pipe(
      tap((result) => this.stepped(result)),
      retry({ resetOnSuccess: true, delay: (error: unknown, attempt: number) => this.retryAfter(error, attempt) }),
    );
    const watched$ = defer(() => {
      this.watch.start();
      return concat(loop$, defer(() => this.finish()).pipe(ignoreElements()));
    });
    return watched$.pipe(
      map((result) => result.fetched),
      finalize(() => {
        this.parts.audit.stop();
        this.parts.lease.stop();
        this.watch.stop();
        this.parts.leftLog.flush();
      }),
    );
  }

  vitals(): LoopVitals {
    return this.vitalSigns.read(this.parts.lease.counts(), this.watch.byStream());
  }

  /** Entries whose handler is running, oldest first. */
  running(): Running[] {
    return this.watch.running();
  }

  /** Entries fetched and not yet settled. */
  inHand(): { stream: string; id: string }[] {
    return this.parts.lease.entries();
  }

  /**
   * After `close()` gave up waiting for a hung handler: the entries fetched and not started
   * are handed back (idle set to minIdleMs, so the next peer's beat takes them), and nothing
   * of ours keeps running for the ones in hand (no lease renewal, and a late result is ignored).
   * True when Redis confirmed the hand-back (or there was none).
   */
  async abandon(): Promise<boolean> {
    const { lease, audit, inProgress } = this.parts;
    this.stopSignal.stop('abandoned');
    audit.stop();
    this.watch.stop();
    const begun = [...inProgress].flatMap((batch) => batch.entries.slice(0, batch.next));
    const unstarted = lease.heldIds(begun);
    lease.stop();
    // Best effort, bounded: a paused server must not hold close(); unreturned, they come back after minIdleMs.
    return within(lease.handBackIds(unstarted, this.d.options.minIdleMs), HAND_BACK_WITHIN_MS, false);
  }

  /** Stop at the next settle point and wake a parked read; the `run()` stream then completes. */
  async stop(): Promise<void> {
    if (!this.stopSignal.stop('stopping')) return;
    await this.parker.wake();
  }

  /** Every step's result: the loop beats (for health); once the groups exist, the loop is ready. */
  private stepped(result: StepResult): void {
    this.vitalSigns.stepped();
    if (result === GROUPS_READY) this.d.onReady();
  }

  /** The backoff before a restart: doubling from retryInitialDelayMs for what may pass, retryMaxDelayMs for a refusal. */
  private retryAfter(error: unknown, attempt: number): Observable<unknown> {
    if (this.stopSignal.stopped) return EMPTY;
    const { retryInitialDelayMs, retryMaxDelayMs } = this.d.options;
    this.vitalSigns.failed(error);
    const retryInMs = isRetryable(error, this.d.onCluster) ? backoffMs(attempt, retryInitialDelayMs, retryMaxDelayMs) : retryMaxDelayMs;
    this.d.onError(error, retryInMs);
    return timer(retryInMs).pipe(takeUntil(this.stopSignal.stopped$));
  }

  /** After the last beat: a read-ahead batch goes back, and the last ack is confirmed (and reported). */
  private async finish(): Promise<void> {
    const { stop, acks, audit } = this.parts;
    const { logger } = this.d;
    await this.parker.handBackAhead();
    audit.stop();
    await stop
      .bounded(audit.handBackWaiting(), () => 'the hand-back of entries waiting for their retry', logger)
      .catch((err: unknown) =>
        logger.warn(`hand-back of entries waiting for their retry failed, a peer takes them after minIdleMs: ${describeError(err)}`),
      );
    await stop
      .bounded(acks.flush(), () => 'the last ack', logger)
      .catch((err: unknown) => logger.warn(`last ack failed, its entries stay pending: ${describeError(err)}`));
  }
}
