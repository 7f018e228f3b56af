import {
  concat,
  concatMap,
  connect,
  defer,
  EMPTY,
  endWith,
  finalize,
  from,
  ignoreElements,
  map,
  merge,
  type Observable,
  retry,
  type Subscription,
  takeUntil,
  tap,
  timer,
} from 'rxjs';
import { backoffMs } from '../backoff.js';
import type { ResolvedBatchOptions } from '../options/batch-options.js';
import { MAX_BATCH_SIZE, type ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { CommandLane, RetryListener } from '../redis/connection/command-lane.js';
import { Lanes } from '../redis/connection/lanes.js';
import { isRetryable } from '../redis/replies/redis-errors.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { slotOf } from '../slots.js';
import type { StreamEntry } from '../stream-entry.js';
import { within } from '../within.js';
import { AckPipeline } from './settle/ack-pipeline.js';
import type { BatchProgress } from './settle/batch-progress.js';
import { settleBatch, type BatchSettlerDeps, type SettleFetched } from './settle/batch-settler.js';
import { Custody } from './custody/custody.js';
import type { PendingAuditDeps } from './custody/pending-audit.js';
import { GroupKeeper } from './read/group-keeper.js';
import { ServerOffer } from './read/server-offer.js';
import type { ServerFeatures } from '../redis/server-features.js';
import { LoopFindings } from './watch/loop-findings.js';
import { VitalSigns, type LoopVitals, type StepResult } from './watch/loop-vitals.js';
import { Parker } from './read/parker.js';
import { Reclaimer } from './read/reclaimer.js';
import { selfDrain$, type SelfDrainDeps } from './read/self-drain.js';
import type { DeliverySource, SettledEvent } from './settle/settled-event.js';
import { StopSignal } from './stop-signal.js';
import { StuckWatch, type Running } from './watch/stuck-watch.js';
import { DelayedPromoter, type DelayedView } from './upkeep/delayed-promoter.js';
import { PauseWatch } from './intake/pause-watch.js';
import { readGatesOf, type IntakePlan } from './intake/intake-plan.js';
import { tenureOf, type TenureDeps, type TenurePlan } from './tenure/tenure-of.js';
import { settlePolicyOf } from './settle/settle-policy-of.js';
import type { SettlePlan, SettlePolicy } from './settle/settle-policy.js';
import type { DirectDecide } from './settle/decide.js';
import type { Tenure } from './tenure/tenure.js';
import type { TenureView } from './tenure/tenure.js';

/** Entries by stream, in order. */
function byStream(entries: readonly StreamEntry[]): Map<string, StreamEntry[]> {
  const by = new Map<string, StreamEntry[]>();
  for (const e of entries) (by.get(e.stream) ?? by.set(e.stream, []).get(e.stream)!).push(e);
  return by;
}

/** How long abandoning may wait on Redis to take entries back after a hung handler. */
const HAND_BACK_WITHIN_MS = 1000;

const GROUPS_READY: StepResult = { step: 'groups', fetched: 0 };

/** Decides entries (checks, the handler through the host's dispatch, the outcome); one per reader, bound to its stop signal. */
export interface Decider {
  /** Decides one entry (`'acked'`: succeeded, to be acked); rejects only when Redis failed (the entry is then still pending). */
  one(entry: StreamEntry, source: DeliverySource): Promise<SettledEvent>;
  /** A batch handler's call: one event per entry. */
  batch(entries: readonly StreamEntry[], source: DeliverySource): Promise<SettledEvent[]>;
  /** `one` split for a caller that awaits the handler itself (with telemetry, an entry with a trace still goes the traced way). */
  direct?: DirectDecide | undefined;
}

/** The decider the host built once, before any reader; each reader binds it to its stop signal (a dead-letter move is bounded once stopping) and its server offer (a move deletes the entry with deleteOnAck). */
export type DeciderFor = (stop: Pick<StopSignal, 'stopped' | 'stopped$'>, offer: Pick<ServerOffer, 'ackDelete'>) => Decider;

/** The streams a reader reads: all on one node (one hash slot on a cluster), one batch handler's at most. */
export interface ReaderStreams extends IntakePlan, TenurePlan, SettlePlan {
  streams: readonly string[];
  /** Set for a batch handler's streams: entries go to it up to `maxSize` at a time, a park not yet full waits up to `maxWaitMs`. */
  batch?: ResolvedBatchOptions | undefined;
}

/** Where a reader's lanes come from: the shared command lane, and how its own connections are named and report. */
export interface ReaderLanes {
  /** The shared command lane (its own blocking lane is the reader's). */
  command: CommandLane;
  /** `<group>:<consumer>` (encoded: connection-name.ts), the connections' name. */
  name: string;
  /** Readers of this consumer: a lone one takes the plain name, the others their slot's. */
  readers: number;
  onError: (lane: string, failure: Error) => void;
  onRetry: RetryListener;
}

/** What a reader tells its host. */
export interface ReaderReport {
  /** An entry settled for good (ack confirmed, failure left pending, dead-lettered). */
  settled(event: SettledEvent): void;
  /** Pending entries found trimmed from their stream before they were acked (data loss). */
  deleted(stream: string, ids: string[]): void;
  /** The loop failed and restarts after `retryInMs`. */
  failed(error: unknown, retryInMs: number): void;
  /** This reader's groups exist, every time its loop (re)starts. */
  ready(reader: Reader): void;
  /** A step of the loop went through (Redis answered). */
  stepped(): void;
  /** The connections' report as the checks beside the loop (the owed-entry audit) see it: see PendingAuditDeps.connection. */
  checks: PendingAuditDeps['connection'];
}

/** What a reader needs from its host: every reader of one consumer shares these. */
export interface ReaderDeps {
  options: ResolvedServerOptions;
  commands: StreamCommands;
  decider: DeciderFor;
  logger: Logger;
  lanes: ReaderLanes;
  report: ReaderReport;
  /** On a cluster MOVED/ASK are a moved slot, retried; on one node they say the URL names a cluster node. */
  onCluster?: boolean;
  /**
   * Resolves once the consumer has started (every reader's groups exist): no handler runs
   * before, as with one reader. Default: at once.
   */
  started?: Promise<void>;
  /** The tenure's durable commands, on their own connection (set when its plan asks for durable acks). */
  durable?: TenureDeps['durable'];
  /** Says a stream paused or resumed (the consumer's one line per pattern). Default: a line per stream. */
  announcePause?: (stream: string, paused: boolean) => void;
}

/**
 * One consumer loop over a set of streams, without Nest. It owns its lanes (its private blocking
 * connection), its ack pipeline and its custody (what it holds and owes), and runs the seed's
 * three steps as one RxJS composition:
 *   groups$      the consumer groups exist (created, or rejoined after a loss)
 *   selfDrain$   XREADGROUP … STREAMS k… 0 until empty (own un-acked work, at once)
 *   beat$        every beat: check$ (what acks and audit found) → reclaim$ (own retries due,
 *                XAUTOCLAIM of idle peer entries) → park$ (XREADGROUP BLOCK … >, with read-ahead)
 * merged with its upkeep (lease renewal, audit checks, the due wake, the stuck-entry watch).
 * Each fetched batch is settled `concurrency` entries at a time and acked in one round trip. One
 * stop signal ends every step, honoured between entries only; the upkeep ends with the work (or
 * at an abandon), and tearing the reader down is unsubscribing. Any Redis failure restarts the
 * steps (groups re-created, own PEL re-drained) after a backoff.
 */
export class Reader {
  readonly streams: readonly string[];
  readonly lanes: Lanes;
  /** Resolves when the loop has finished (its steps completed, or torn down). */
  readonly done: Promise<void>;
  private readonly stopSignal = new StopSignal();
  private readonly custody: Custody;
  private readonly acks: AckPipeline;
  private readonly findings = new LoopFindings();
  /** What the server offers of the newer stream commands, found at each (re)start. */
  private readonly offer: ServerOffer;
  /** Batches being settled, and how far each got (what abandon hands back). */
  private readonly inProgress = new Set<BatchProgress>();
  private readonly keeper: GroupKeeper;
  private readonly parker: Parker;
  private readonly reclaimer: Reclaimer;
  private readonly vitalSigns: VitalSigns;
  private readonly watch: StuckWatch;
  private readonly selfDrain$: Observable<StepResult>;
  private readonly drainDeps: SelfDrainDeps;
  private readonly subscription: Subscription;
  /** When it may read and how its acks go (always, or while it owns its partition). */
  private readonly tenure: Tenure;
  /** How fetched entries settle, beyond the batch settler (fair groups). */
  private readonly policy: SettlePolicy;
  /** performance.now() of the loop's last step that answered (the liveness of an owned partition). */
  private lastStepAt = performance.now();
  /** Moves this reader's streams' delayed entries in when due. */
  private readonly promoter: DelayedPromoter;
  /** Which of its streams are paused for the group. */
  private readonly pause: PauseWatch;

  constructor(
    plan: ReaderStreams,
    private readonly d: ReaderDeps,
  ) {
    const { streams, batch } = plan;
    const { options, commands, logger } = d;
    const stop = this.stopSignal;
    const { findings } = this;
    this.streams = streams;
    const tenure = (this.tenure = tenureOf(plan, {
      stream: streams[0]!,
      options,
      commands,
      durable: d.durable,
      findings,
      stop,
      logger,
      lastStepAt: () => this.lastStepAt,
    }));
    const offer = (this.offer = new ServerOffer(options.newerCommands, options.deleteOnAck, tenure.claimsOnRead, tenure.fsync));
    const lanes = d.lanes;
    this.lanes = new Lanes({
      connection: options.connection,
      name: lanes.readers === 1 ? lanes.name : `${lanes.name}:${slotOf(streams[0]!)}${batch ? ':batch' : ''}`,
      onError: lanes.onError,
      onRetry: lanes.onRetry,
      command: lanes.command,
      slotKey: streams[0]!,
    });
    this.custody = new Custody({
      commands,
      consumer: options.consumer,
      minIdleMs: options.minIdleMs,
      leaseRenewMs: options.leaseRenewMs,
      maxWaitingRetries: options.maxWaitingRetries,
      logger,
      stop,
      findings,
      onDeleted: (stream, ids) => d.report.deleted(stream, ids),
      connection: d.report.checks,
      onSettled: (event) => d.report.settled(event),
      handedLookable: () => (tenure.looksForHanded ? this.pause.readable() : []),
      mayTakeBack: () => tenure.mayTakeBack(),
    });
    const { custody } = this;
    this.acks = new AckPipeline((entries) => tenure.ack(entries), custody, findings);
    const decider = d.decider(stop, offer);
    // Built once: settleBatch runs per fetched batch (the drain's hot path).
    const batchDeps: BatchSettlerDeps = {
      custody,
      acks: this.acks,
      decide: decider.one,
      direct: decider.direct,
      batchHandler: batch && { maxSize: batch.maxSize, decide: decider.batch },
      concurrency: options.concurrency,
      handBackIdleMs: options.minIdleMs,
      stop,
      inProgress: this.inProgress,
      // A pause seen mid-batch: what the batch has not started goes back, uncounted.
      barred: (stream) => this.pause.has(stream),
      putBack: async (entries, idleMs) => {
        for (const [stream, list] of byStream(entries)) await commands.putBack(stream, options.consumer, list, idleMs);
      },
      logger,
    };
    const policy = (this.policy = settlePolicyOf(plan, {
      decide: decider.one,
      custody,
      acks: this.acks,
      concurrency: options.concurrency,
      minIdleMs: options.minIdleMs,
      leaseRenewMs: options.leaseRenewMs,
      deserializer: options.deserializer,
      slots: commands.keySlots,
      stop,
      inProgress: this.inProgress,
      barred: () => this.pause.has(streams[0]!),
      putBack: batchDeps.putBack!,
      recount: (entries) => commands.recount(streams[0]!, options.consumer, entries),
      logger,
    }));
    const settle: SettleFetched =
      tenure.settle ?? policy.settle ?? ((entries, source, inHand = 0) => settleBatch(batchDeps, entries, source, inHand));
    // COUNT of every read and reclaim: for a batch handler, enough for `concurrency` calls of `maxSize`
    // (at most MAX_BATCH_SIZE, unless one call alone needs more).
    const count = batch ? Math.max(batch.maxSize, Math.min(batch.maxSize * options.concurrency, MAX_BATCH_SIZE)) : options.batchSize;
    const pause = (this.pause = new PauseWatch({
      pauses: commands.pauses,
      group: options.group,
      streams,
      checkMs: options.flowCheckMs,
      logger,
      announce: d.announcePause,
    }));
    const step = { stop, streams, count, settle, logger, consumer: options.consumer, minIdleMs: options.minIdleMs, pause };
    const arrivals = {
      commands,
      custody,
      maxWaitingRetries: tenure.maxWaitingRetries(options.maxWaitingRetries),
      onWaiting: tenure.onWaiting,
    };
    this.drainDeps = { ...step, ...arrivals, readAhead: options.readAhead };
    this.selfDrain$ = selfDrain$({ ...this.drainDeps, drainable: () => pause.drainable() });
    this.reclaimer = new Reclaimer({ ...step, ...arrivals, blockMs: options.blockMs, leaseRenewMs: options.leaseRenewMs, offer });
    this.parker = new Parker(
      {
        ...step,
        ...arrivals,
        blockMs: options.blockMs,
        // A read ahead takes its grants while this batch runs: starts trail them by up to a batch, the count per window holds.
        readAhead: options.readAhead,
        gates: readGatesOf(plan, { pause, commands, stop, offer, minIdleMs: options.minIdleMs, custody, readSize: policy.readSize }),
        lanes: this.lanes,
        fetch: commands.fetch,
        custody,
        batch,
      },
      this.reclaimer,
    );
    tenure.bind({ custody, acks: this.acks, decideOne: decider.one, inProgress: this.inProgress, pause, parker: this.parker, offer });
    this.keeper = new GroupKeeper(
      {
        stop,
        streams,
        group: options.group,
        consumer: options.consumer,
        groupStartId: options.groupStartId,
        logger,
        commands,
        custody,
        acks: this.acks,
        findings,
        offer,
      },
      this.parker,
    );
    this.promoter = new DelayedPromoter({ delayed: commands.delayed, streams, checkMs: options.flowCheckMs, logger });
    this.vitalSigns = new VitalSigns(d.onCluster);
    this.watch = new StuckWatch(this.inProgress, options.stuckEntryMs, options.consumer, logger);
    let subscription: Subscription | undefined;
    this.done = new Promise<void>((resolve) => {
      subscription = this.run().subscribe({ next: () => d.report.stepped(), complete: resolve, error: resolve });
    });
    this.subscription = subscription!;
  }

  /** The steps, then the finish, merged with the upkeep; emits the number of entries each step fetched; completes after `stop()`. */
  private run(): Observable<number> {
    const stop = this.stopSignal;
    // The pause flags are read before anything is: a worker that starts while paused stays paused.
    const groups$ = defer(async () => {
      await this.keeper.ensureGroups();
      await this.pause.look();
    }).pipe(map(() => GROUPS_READY));
    // Stopped before the gate opened (close() during the start): the gate never opens, go straight to finish.
    const gate$ = defer(() => from(this.d.started ?? Promise.resolve())).pipe(takeUntil(stop.stopped$));
    const check$ = defer(() => (this.keeper.due ? from(this.keeper.checkGroups()).pipe(ignoreElements()) : EMPTY));
    // A stream resumed after a (re)start that skipped its self-drain: drained now.
    const resumed$ = defer(() => {
      const streams = this.pause.takeResumed();
      return streams.length > 0 ? selfDrain$({ ...this.drainDeps, streams }) : EMPTY;
    });
    const fullBeat$ = concat(check$, resumed$, this.reclaimer.step$, this.parker.step$);
    // Under load check$ and reclaim$ have nothing to do: the beat is the park alone, parked again at once while
    // that holds (where the tenure checks nothing between beats), with no concat or re-subscription per batch.
    const beatWork = () => this.keeper.due || this.reclaimer.due || this.pause.owesDrain;
    const parks$ = this.tenure.parksInARow ? this.parker.parks$(() => !stop.stopped && !beatWork()) : this.parker.step$;
    const beat$ = defer(() => (beatWork() ? fullBeat$ : parks$));
    const reads$ = this.tenure.reads$({ groups$, selfDrain$: this.selfDrain$, beat$ });
    const steps$ = concat(this.tenure.restart$, this.policy.restart$, groups$, gate$.pipe(concatMap(() => reads$)));
    const work$ = concat(
      steps$.pipe(
        tap((result) => this.stepped(result)),
        retry({ resetOnSuccess: true, delay: (error: unknown, attempt: number) => this.retryAfter(error, attempt) }),
      ),
      defer(() => this.finish()).pipe(ignoreElements()),
    );
    // What runs beside the steps: the custody's timers, the stuck-entry watch, and a wake of the park
    // whenever the acks or the audit find something. It ends when the work does, or at an abandon.
    const upkeep$ = merge(
      this.custody.upkeep$,
      // Once the consumer started (its groups exist): nothing of them may queue ahead of XGROUP CREATE.
      defer(() => from(this.d.started ?? Promise.resolve())).pipe(concatMap(() => merge(this.promoter.looks$, this.pause.looks$))),
      // A pause ends the park (the next reads without that stream) and holds the key queues; a resume ends a paused wait.
      merge(this.pause.changed$, this.findings.wake$).pipe(
        tap(() => {
          this.parker.wakePark();
          this.tenure.nudge();
          this.policy.nudge();
        }),
      ),
      this.watch.checks$,
      this.tenure.upkeep$,
      this.policy.upkeep$,
    ).pipe(ignoreElements(), takeUntil(stop.abandoned$));
    return work$.pipe(
      connect((steps) => merge(steps, upkeep$.pipe(takeUntil(steps.pipe(ignoreElements(), endWith(0)))))),
      map((result) => result.fetched),
      finalize(() => {
        this.custody.flushLeft();
        this.custody.end();
      }),
    );
  }

  /** What the server offered at the last (re)start; undefined before the first. */
  get features(): ServerFeatures | undefined {
    return this.offer.features;
  }

  vitals(): LoopVitals {
    return this.vitalSigns.read(this.custody.counts(), this.watch.byStream());
  }

  /** Entries whose handler is running, oldest first. */
  running(): Running[] {
    return this.watch.running();
  }

  /** What the tenure shows health and inspect (a partition's ownership and blocked keys); undefined for the always tenure. */
  tenureView(): TenureView | undefined {
    return this.tenure.view();
  }

  /** What waits in `stream`'s schedule of delayed entries, by this reader's last look; undefined before one. */
  delayed(stream: string): DelayedView | undefined {
    return this.promoter.view(stream);
  }

  /** Looks at the pause flags now (the next look would, within flowCheckMs). */
  lookAtPauses(): Promise<void> {
    return this.pause.look();
  }

  /** Whether `stream` is paused for the group, by this reader's last look. */
  paused(stream: string): boolean {
    return this.pause.has(stream);
  }

  /** Entries fetched and not yet settled. */
  inHand(): { stream: string; id: string }[] {
    return this.custody.entries();
  }

  /**
   * After `close()` gave up waiting for a hung handler: the entries fetched and not started
   * are handed back (idle set to minIdleMs, so the next peer's beat takes them), and nothing
   * of ours keeps running for the ones in hand (the upkeep ends, and a late result is ignored).
   * True when Redis confirmed the hand-back (or there was none).
   */
  async abandon(): Promise<boolean> {
    this.stopSignal.stop('abandoned');
    const begun = [...this.inProgress].flatMap((batch) => batch.entries.slice(0, batch.next));
    // Their handlers may still run, but none is this reader's any more: health and the stuck-entry log forget them.
    this.inProgress.clear();
    // Best effort, bounded: a paused server must not hold close(); unreturned, they come back after minIdleMs.
    return within(this.custody.abandon(begun, this.d.options.minIdleMs), HAND_BACK_WITHIN_MS, false);
  }

  /** Stop at the next settle point and wake a parked read; the loop then finishes and `done` resolves. */
  async stop(): Promise<void> {
    if (!this.stopSignal.stop('stopping')) return;
    await this.parker.wake();
  }

  /** Tears the loop down at once (after an abandon, or a start cut short): nothing of it runs after. */
  cut(): void {
    this.subscription.unsubscribe();
  }

  /** Every step's result: the loop beats (for health); once the groups exist, the reader is ready. */
  private stepped(result: StepResult): void {
    this.lastStepAt = performance.now();
    this.vitalSigns.stepped();
    if (result === GROUPS_READY) this.d.report.ready(this);
  }

  /** The backoff before a restart: doubling from retryInitialDelayMs for what may pass, retryMaxDelayMs for a refusal. */
  private retryAfter(error: unknown, attempt: number): Observable<unknown> {
    if (this.stopSignal.stopped) return EMPTY;
    const { retryInitialDelayMs, retryMaxDelayMs } = this.d.options;
    this.vitalSigns.failed(error);
    const retryInMs = isRetryable(error, this.d.onCluster) ? backoffMs(attempt, retryInitialDelayMs, retryMaxDelayMs) : retryMaxDelayMs;
    this.d.report.failed(error, retryInMs);
    return timer(retryInMs).pipe(takeUntil(this.stopSignal.stopped$));
  }

  /** After the last beat: what is in hand ends the tenure's way (handed back or acked, its partition left). */
  private async finish(): Promise<void> {
    await this.policy.finish();
    await this.tenure.finish();
  }
}
