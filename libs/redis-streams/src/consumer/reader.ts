import {
  concat,
  concatMap,
  connect,
  defer,
  firstValueFrom,
  race,
  EMPTY,
  endWith,
  finalize,
  from,
  ignoreElements,
  map,
  merge,
  type Observable,
  of,
  repeat,
  retry,
  takeWhile,
  type Subscription,
  takeUntil,
  tap,
  timer,
} from 'rxjs';
import { backoffMs } from '../backoff.js';
import { describeError } from '../describe-error.js';
import type { ResolvedBatchOptions } from '../options/batch-options.js';
import { MAX_BATCH_SIZE, type ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { CommandLane, RetryListener } from '../redis/command-lane.js';
import { Lanes } from '../redis/lanes.js';
import { isRetryable } from '../redis/redis-errors.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { slotOf } from '../slots.js';
import type { StreamEntry } from '../stream-entry.js';
import { within } from '../within.js';
import { AckPipeline } from './ack-pipeline.js';
import type { BatchProgress } from './batch-progress.js';
import { settleBatch, type BatchSettlerDeps, type SettleFetched } from './batch-settler.js';
import { Custody } from './custody.js';
import { GroupKeeper } from './group-keeper.js';
import { ServerOffer } from './server-offer.js';
import type { ServerFeatures } from '../redis/server-features.js';
import { LoopFindings } from './loop-findings.js';
import { VitalSigns, type LoopVitals, type StepResult } from './loop-vitals.js';
import { Parker } from './parker.js';
import { Reclaimer } from './reclaimer.js';
import { selfDrain$, type SelfDrainDeps } from './self-drain.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import { StopSignal } from './stop-signal.js';
import { StuckWatch, type Running } from './stuck-watch.js';
import { KeyLanes, type BlockedKey } from './key-lanes.js';
import { DelayedPromoter, type DelayedView } from './delayed-promoter.js';
import { PauseWatch } from './pause-watch.js';
import { readGatesOf, type IntakePlan } from './intake/intake-plan.js';
import { PartitionOwner, type OrderedStream, type OwnershipView } from './partition-owner.js';
import { AckDurability, type DurabilityView } from './ack-durability.js';
import type { DurableOwnershipCommands } from '../redis/durable-ownership-commands.js';
import type { Confirmation } from '../redis/replication-wait.js';
import type { ShortAck } from '../redis/stream-commands.js';
import { PARK_GRACE_MS } from '../redis/park-watchdog.js';

/** Entries by stream, in order. */
function byStream(entries: readonly StreamEntry[]): Map<string, StreamEntry[]> {
  const by = new Map<string, StreamEntry[]>();
  for (const e of entries) (by.get(e.stream) ?? by.set(e.stream, []).get(e.stream)!).push(e);
  return by;
}

/** How long abandoning may wait on Redis to take entries back after a hung handler. */
const HAND_BACK_WITHIN_MS = 1000;

const NEXT_BEAT = of(0);
const GROUPS_READY: StepResult = { step: 'groups', fetched: 0 };
const STANDBY: StepResult = { step: 'standby', fetched: 0 };

/** Waiting retries an ordered reader may hold: all of them (none is left to the group, whose next reader would run later entries of its key first). */
const ORDERED_WAITING_RETRIES = 1_000_000_000;

/** What health and inspect show of an ordered reader: its partition's ownership, and the keys waiting behind a failed entry. */
export interface OrderingView extends OwnershipView {
  blockedKeys: BlockedKey[];
  /** Entries held in its key lanes (queued, running, or behind a failed entry). */
  held: number;
  /** Its durable acks, when it has them (`durableAcks`). */
  durability?: DurabilityView;
}

/** Decides entries (checks, the handler through the host's dispatch, the outcome); one per reader, bound to its stop signal. */
export interface Settler {
  /** Decides one entry (`'acked'`: succeeded, to be acked); rejects only when Redis failed (the entry is then still pending). */
  one(entry: StreamEntry, source: DeliverySource): Promise<SettledEvent>;
  /** A batch handler's call: one event per entry. */
  batch(entries: readonly StreamEntry[], source: DeliverySource): Promise<SettledEvent[]>;
}

/** The settler the host built once, before any reader; each reader binds it to its stop signal (a dead-letter move is bounded once stopping) and its server offer (a move deletes the entry with deleteOnAck). */
export type SettlerFor = (stop: { readonly stopped: boolean }, offer: Pick<ServerOffer, 'ackDelete'>) => Settler;

/** The streams a reader reads: all on one node (one hash slot on a cluster), one batch handler's at most. */
export interface ReaderStreams extends IntakePlan {
  streams: readonly string[];
  /** Set for a batch handler's streams: entries go to it up to `maxSize` at a time, a park not yet full waits up to `maxWaitMs`. */
  batch?: ResolvedBatchOptions | undefined;
  /** Set for an ordered pattern's stream (one per reader): it reads only while this consumer owns the partition. */
  ordered?: OrderedStream | undefined;
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
}

/** What a reader needs from its host: every reader of one consumer shares these. */
export interface ReaderDeps {
  options: ResolvedServerOptions;
  commands: StreamCommands;
  settler: SettlerFor;
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
  /** The durable acks' commands, on their own connection: set when an ordered pattern has `durableAcks`. */
  durable?: DurableOwnershipCommands | undefined;
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
  /** An ordered reader's ownership of its partition, and its key lanes (the settler of its entries). */
  private readonly owner: PartitionOwner | undefined;
  private readonly keyLanes: KeyLanes | undefined;
  /** An ordered reader's durable acks (`durableAcks`): whether the replicas keep up, and what it may do. */
  private readonly durability: AckDurability | undefined;
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
    const { streams, batch, ordered } = plan;
    const { options, commands, logger } = d;
    const stop = this.stopSignal;
    const { findings } = this;
    this.streams = streams;
    // XREADGROUP … CLAIM serves the most idle first: never on an ordered stream.
    const offer = (this.offer = new ServerOffer(
      options.newerCommands,
      options.deleteOnAck,
      !ordered,
      ordered?.durableAcks?.fsync === true,
    ));
    const durable = ordered?.durableAcks && d.durable;
    const durability = (this.durability =
      ordered?.durableAcks && durable
        ? new AckDurability(ordered.durableAcks, { stream: streams[0]!, logger, onChange: () => findings.wake() })
        : undefined);
    const owner = (this.owner =
      ordered &&
      new PartitionOwner({
        ownership: commands.ownership,
        stream: streams[0]!,
        ordered,
        consumer: options.consumer,
        ttlMs: options.minIdleMs,
        beatMs: options.leaseRenewMs,
        logger,
        onChange: () => findings.wake(),
        durable: durable && durability ? { commands: durable, durability } : undefined,
        stalledForMs: () => this.stalledForMs(),
        // Past the longest a step may take (a park, a command, the backoff after a failure), with a beat to spare.
        stallMs: options.blockMs + 2 * PARK_GRACE_MS + options.commandTimeoutMs + options.retryMaxDelayMs + options.leaseRenewMs,
      }));
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
      onSettled: (event) => d.report.settled(event),
      handedLookable: () => (this.keyLanes ? [] : this.pause.readable()),
      mayTakeBack: () => owner === undefined || owner.holds(),
    });
    const { custody } = this;
    this.acks = new AckPipeline(
      owner ? (entries) => this.ackOwned(entries) : (entries) => commands.ackMany(entries, offer.ackDelete),
      custody,
      findings,
    );
    const settler = d.settler(stop, offer);
    const keyLanes = (this.keyLanes =
      owner &&
      new KeyLanes({
        settle: settler.one,
        custody,
        acks: this.acks,
        concurrency: options.concurrency,
        // Two reads' worth in flight: the next read is out while this one's entries run.
        room: Math.max(2 * options.batchSize, 2 * options.concurrency),
        stop,
        mayStart: () => owner.valid() && (durability?.mayStart() ?? true),
        ending: () => owner.ending,
        paused: () => this.pause.anyPaused,
        confirmSettled: durability && ((entry) => this.confirmSettled(entry)),
        ackAgain: async (entries) => {
          await this.ackOwned(entries);
          for (const entry of entries) custody.release(entry);
        },
        inProgress: this.inProgress,
        // Only while the partition is this consumer's: a stale owner's XCLAIM would take a peer's entries.
        putBack: (entries) => (owner.holds() ? owner.giveBack(entries) : Promise.resolve()),
        recount: (entries) => commands.recount(streams[0]!, options.consumer, entries),
        logger,
      }));
    // Built once: settleBatch runs per fetched batch (the drain's hot path).
    const batchDeps: BatchSettlerDeps = {
      custody,
      acks: this.acks,
      settle: settler.one,
      batchHandler: batch && { maxSize: batch.maxSize, decide: settler.batch },
      concurrency: options.concurrency,
      handBackIdleMs: options.minIdleMs,
      stop,
      inProgress: this.inProgress,
      // A pause seen mid-batch: what the batch has not started goes back, uncounted.
      paused: (stream) => this.pause.has(stream),
      putBack: async (entries, idleMs) => {
        for (const [stream, list] of byStream(entries)) await commands.putBack(stream, options.consumer, list, idleMs);
      },
      logger,
    };
    const settle: SettleFetched = keyLanes
      ? (entries, source) => keyLanes.accept(entries, source)
      : (entries, source, inHand = 0) => settleBatch(batchDeps, entries, source, inHand);
    // COUNT of every read and reclaim: for a batch handler, enough for `concurrency` calls of `maxSize`
    // (at most MAX_BATCH_SIZE, unless one call alone needs more).
    const count = batch ? Math.max(batch.maxSize, Math.min(batch.maxSize * options.concurrency, MAX_BATCH_SIZE)) : options.batchSize;
    const pause = (this.pause = new PauseWatch({
      pauses: commands.pauses,
      group: options.group,
      streams,
      checkMs: options.flowCheckMs,
      logger,
    }));
    const step = { stop, streams, count, settle, logger, consumer: options.consumer, minIdleMs: options.minIdleMs, pause };
    const arrivals = {
      commands,
      custody,
      maxWaitingRetries: keyLanes ? ORDERED_WAITING_RETRIES : options.maxWaitingRetries,
      onWaiting: keyLanes && ((entry: StreamEntry) => keyLanes.blockFor(entry)),
    };
    this.drainDeps = { ...step, ...arrivals, readAhead: options.readAhead };
    this.selfDrain$ = selfDrain$({ ...this.drainDeps, drainable: () => pause.drainable() });
    this.reclaimer = new Reclaimer({ ...step, ...arrivals, blockMs: options.blockMs, leaseRenewMs: options.leaseRenewMs, offer });
    this.parker = new Parker(
      {
        ...step,
        ...arrivals,
        offer,
        blockMs: options.blockMs,
        // A read ahead takes its grants while this batch runs: starts trail them by up to a batch, the count per window holds.
        readAhead: options.readAhead,
        gates: readGatesOf(plan, { pause, limits: commands.rateLimits, stop }),
        lanes: this.lanes,
        fetch: commands.fetch,
        custody,
        batch,
      },
      this.reclaimer,
    );
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
    // Under load check$ and reclaim$ have nothing to do: the beat is the park alone (no concat per batch).
    const beat$ = defer(() => (this.keeper.due || this.reclaimer.due || this.pause.owesDrain ? fullBeat$ : this.parker.step$));
    const beats$ = beat$.pipe(repeat({ delay: () => (stop.stopped ? EMPTY : NEXT_BEAT) }));
    const read$ = this.owner ? this.orderedCycles$(groups$, beat$) : concat(this.selfDrain$, beats$);
    // An ordered reader's lanes settle before any restart: self-drain must not meet an entry a lane still runs.
    const start$ = this.keyLanes ? concat(defer(() => this.quiesce()).pipe(ignoreElements()), groups$) : groups$;
    const steps$ = concat(start$, gate$.pipe(concatMap(() => read$)));
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
      // A pause ends the park (the next reads without that stream) and holds the key lanes; a resume ends a paused wait.
      this.pause.changed$.pipe(
        tap(() => {
          this.parker.wakePark();
          this.keyLanes?.nudge();
        }),
      ),
      this.watch.checks$,
      this.findings.wake$.pipe(
        tap(() => {
          this.parker.wakePark();
          this.keyLanes?.nudge();
        }),
      ),
      this.owner ? this.owner.renewals$.pipe(tap(() => this.keyLanes!.nudge())) : EMPTY,
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

  /**
   * An ordered reader, over and over until stopped: standby (one ownership beat every leaseRenewMs
   * until the share-out gives it the partition), take over the previous owner's pending entries,
   * self-drain them in id order, then beat while it owns the partition; when it no longer does
   * (lost, or asked to give it to a member that joined), what is in hand finishes and it releases.
   */
  private orderedCycles$(groups$: Observable<StepResult>, beat$: Observable<StepResult>): Observable<StepResult> {
    const stop = this.stopSignal;
    const owner = this.owner!;
    const lanes = this.keyLanes!;
    const standby$ = defer(() => from(owner.beat())).pipe(
      repeat({ delay: () => timer(this.d.options.leaseRenewMs).pipe(takeUntil(stop.stopped$)) }),
      takeWhile((owned) => !owned && !stop.stopped),
      map(() => STANDBY),
    );
    const ownedBeats$ = defer(() => {
      lanes.rethrow();
      return beat$;
    }).pipe(repeat({ delay: () => (stop.stopped || owner.ending || lanes.fenced ? EMPTY : NEXT_BEAT) }));
    const owned$ = concat(
      defer(() => owner.takeOver()).pipe(ignoreElements()),
      groups$,
      this.selfDrain$,
      defer(() => (owner.ending ? EMPTY : ownedBeats$)),
    );
    const cycle$ = concat(
      standby$,
      defer(() => (owner.owned && !stop.stopped ? owned$ : EMPTY)),
      defer(() => this.release()).pipe(ignoreElements()),
    );
    return cycle$.pipe(repeat({ delay: () => (stop.stopped ? EMPTY : NEXT_BEAT) }));
  }

  /** The lanes' running entries finish (and their acks are confirmed); what they queued is dropped, to be read again. */
  private async quiesce(): Promise<void> {
    const lanes = this.keyLanes!;
    await lanes.settled();
    lanes.clear();
  }

  /**
   * The owned phase is over: nothing of the partition is in hand here any more (running entries
   * finished and acked, the read-ahead answered, what was queued left pending for the next owner,
   * who takes over all of it, with the delivery counts they had before this owner read them), then
   * the owner key goes.
   */
  private async release(): Promise<void> {
    const owner = this.owner!;
    const lanes = this.keyLanes!;
    await lanes.settled();
    const ahead = await this.parker.dropAhead();
    await this.acks.flush().catch(() => undefined);
    const fenced = lanes.fenced;
    const unstarted = [...lanes.clear(), ...ahead.filter((e) => e.fields !== null)];
    this.custody.restart();
    this.custody.forget(this.streams[0]!);
    lanes.forgetSettled();
    this.durability?.reset();
    if (!owner.owned) return;
    // Still the owner (asked to give it up, or stopping): what it read and never started goes back with the
    // count it had. Not once fenced or lost: those entries may be the new owner's already.
    if (!fenced && owner.holds() && unstarted.length > 0)
      await owner
        .giveBack(unstarted)
        .catch((err: unknown) =>
          this.d.logger.warn(
            `could not put back the delivery counts of ${unstarted.length} entries of "${this.streams[0]}": ${describeError(err)}`,
          ),
        );
    await owner.release(false);
  }

  /**
   * An ordered reader's ack: fenced (a stale owner's is refused). With durable acks it waits for the
   * replicas too; not confirmed, a hold sends it again (an ack is idempotent, and with it the wait
   * covers it on whichever master answers now) until they confirm, the partition changes hands or
   * the reader stops; carrying on, it returns (degraded). What the first round trip found short is
   * what counts.
   */
  private async ackOwned(entries: readonly StreamEntry[]): Promise<ShortAck[]> {
    const owner = this.owner!;
    const stream = this.streams[0]!;
    const ids = entries.map((e) => e.id);
    const { durability } = this;
    const durable = this.d.durable;
    if (!durability || !durable) return this.d.commands.ackFenced(stream, ids, owner.fence, this.offer.ackDelete);
    let first: ShortAck[] | undefined;
    for (;;) {
      const wait = durability.waitsOnAcks() ? durability.wanted : undefined;
      const { short, confirmed } = await durable.ackFenced(stream, ids, owner.fence, this.offer.ackDelete, wait);
      first ??= short;
      if (!confirmed || durability.record(confirmed) || !(await this.holdOn(confirmed))) return first;
    }
  }

  /** A dead-letter move of a durable ordered reader: settled once the replicas have it (a move lost with a master restarts the loop). */
  private async confirmSettled(entry: StreamEntry): Promise<void> {
    const owner = this.owner!;
    const durability = this.durability!;
    for (;;) {
      if (!durability.waitsOnAcks()) return;
      const { pending, confirmed } = await this.d.durable!.confirmSettled(
        entry.stream,
        [entry.id],
        owner.fence,
        this.d.options.minIdleMs,
        durability.wanted,
      );
      if (pending.length > 0)
        throw new Error(
          `the dead-letter move of entry ${entry.id} of "${entry.stream}" is not on the master that answers now (lost with a master that failed): it is pending again, and is settled again first`,
        );
      if (durability.record(confirmed) || !(await this.holdOn(confirmed))) return;
    }
  }

  /** A hold's next try: false once the reader stops or the partition is no longer this one's (what was sent stays as it is). */
  private async holdOn(confirmed: Confirmation): Promise<boolean> {
    const stop = this.stopSignal;
    if (stop.stopped || !this.owner!.holds()) return false;
    // A wait refused at once (WAITAOF on a master without AOF) would spin: the next try after the wait's time.
    if (confirmed.refused) await firstValueFrom(race(timer(this.durability!.wanted.timeoutMs), stop.stopped$), { defaultValue: 0 });
    return !stop.stopped && this.owner!.holds();
  }

  /**
   * How long an owned partition's loop has gone without progress (a step answered, an entry settled);
   * 0 while it waits on something it chose: handlers running, a hold of its durable acks.
   */
  private stalledForMs(): number {
    const lanes = this.keyLanes;
    if (!lanes || lanes.runningCount > 0 || (this.durability && !this.durability.mayStart())) return 0;
    return performance.now() - Math.max(this.lastStepAt, lanes.lastTurnEndAt);
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

  /** An ordered reader's partition: its ownership and the keys waiting behind a failed entry; undefined for any other. */
  ordering(): OrderingView | undefined {
    if (!this.owner || !this.keyLanes) return undefined;
    return {
      ...this.owner.view(),
      blockedKeys: this.keyLanes.blockedKeys(),
      held: this.keyLanes.held,
      ...(this.durability ? { durability: this.durability.view() } : {}),
    };
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

  /** After the last beat: a read-ahead batch goes back, waiting retries become a peer's, and the last ack is confirmed (and reported). */
  private async finish(): Promise<void> {
    const stop = this.stopSignal;
    const { logger } = this.d;
    // An ordered reader released its partition at the end of its cycle; it leaves the share-out now.
    if (this.owner) {
      // Stopped during a backoff, mid-cycle: what the lanes run finishes and is acked before the owner key goes.
      await stop.bounded(this.keyLanes!.settled(), () => 'the handlers in hand', logger);
      await stop.bounded(this.acks.flush(), () => 'the last ack', logger).catch(() => undefined);
      await stop
        .bounded(this.owner.release(true), () => 'leaving the partition share-out', logger)
        .catch((err: unknown) => logger.warn(`could not leave the share-out of "${this.streams[0]}": ${describeError(err)}`));
      return;
    }
    await this.parker.handBackAhead();
    await stop
      .bounded(this.custody.handBackWaiting(), () => 'the hand-back of entries waiting for their retry', logger)
      .catch((err: unknown) =>
        logger.warn(`hand-back of entries waiting for their retry failed, a peer takes them after minIdleMs: ${describeError(err)}`),
      );
    await stop
      .bounded(this.acks.flush(), () => 'the last ack', logger)
      .catch((err: unknown) => logger.warn(`last ack failed, its entries stay pending: ${describeError(err)}`));
  }
}
