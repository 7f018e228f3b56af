import {
  concat,
  defer,
  EMPTY,
  firstValueFrom,
  from,
  ignoreElements,
  map,
  of,
  race,
  repeat,
  takeUntil,
  takeWhile,
  tap,
  timer,
  type Observable,
} from 'rxjs';
import { describeError } from '../../describe-error.js';
import type { ResolvedServerOptions } from '../../options/server-options.js';
import type { Logger } from '../../ports.js';
import type { DurableOwnershipCommands } from '../../redis/tenure/durable-ownership-commands.js';
import { PARK_GRACE_MS } from '../../redis/connection/park-watchdog.js';
import type { Confirmation } from '../../redis/produce/replication-wait.js';
import type { ShortAck, StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import { AckDurability } from './ack-durability.js';
import type { SettleFetched } from '../settle/batch-settler.js';
import { KeyQueues } from './key-queues.js';
import type { LoopFindings } from '../watch/loop-findings.js';
import type { StepResult } from '../watch/loop-vitals.js';
import { PartitionOwner, type OrderedStream } from './partition-owner.js';
import type { StopSignal } from '../stop-signal.js';
import type { OrderingView } from './ordering-view.js';
import type { Tenure, TenureParts, TenureSteps } from './tenure.js';

const NEXT_BEAT = of(0);
const STANDBY: StepResult = { step: 'standby', fetched: 0 };

/** Waiting retries an ordered reader may hold: all of them (none is left to the group, whose next reader would run later entries of its key first). */
const ORDERED_WAITING_RETRIES = 1_000_000_000;

export interface PartitionTenureDeps {
  ordered: OrderedStream;
  /** The partition's stream (an ordered reader reads one). */
  stream: string;
  options: ResolvedServerOptions;
  commands: Pick<StreamCommands, 'ownership' | 'ackFenced' | 'recount'>;
  /** The durable acks' commands, on their own connection: set when the pattern has `durableAcks`. */
  durable: DurableOwnershipCommands | undefined;
  findings: Pick<LoopFindings, 'wake'>;
  stop: StopSignal;
  logger: Logger;
  /** performance.now() of the loop's last step that answered. */
  lastStepAt: () => number;
}

/**
 * An ordered pattern's reader reads while this consumer owns the stream's partition: standby (one
 * ownership beat every leaseRenewMs until the share-out gives it the partition), take over the
 * previous owner's pending entries, self-drain them in id order, then beat while it owns it; when it
 * no longer does (lost, or asked to give it to a member that joined), what is in hand finishes and it
 * releases. Its entries go through key queues (one key's at a time, in id order), its acks are fenced
 * (a stale owner's are refused) and, with `durableAcks`, confirmed on the replicas.
 */
export class PartitionTenure implements Tenure {
  readonly claimsOnRead = false;
  readonly fsync: boolean;
  readonly looksForHanded = false;
  /** Between beats it checks its lanes (a fenced ack, a failure) and whether it is giving the partition up. */
  readonly parksInARow = false;
  readonly restart$: Observable<never>;
  readonly upkeep$: Observable<unknown>;
  readonly onWaiting: (entry: StreamEntry) => void;
  /** Its entries go through the key queues: one key's at a time, in id order. */
  readonly settle: SettleFetched;
  private readonly owner: PartitionOwner;
  /** Its durable acks (`durableAcks`): whether the replicas keep up, and what it may do. */
  private readonly durability: AckDurability | undefined;
  private parts!: TenureParts;
  private keyQueues!: KeyQueues;

  constructor(private readonly d: PartitionTenureDeps) {
    const { ordered, options, logger, findings, stream } = d;
    this.fsync = ordered.durableAcks?.fsync === true;
    const durable = ordered.durableAcks && d.durable;
    const durability = (this.durability =
      ordered.durableAcks && durable
        ? new AckDurability(ordered.durableAcks, { stream, logger, onChange: () => findings.wake() })
        : undefined);
    this.owner = new PartitionOwner({
      ownership: d.commands.ownership,
      stream,
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
    });
    // The lanes settle before any restart: self-drain must not meet an entry a lane still runs.
    this.restart$ = defer(() => this.quiesce()).pipe(ignoreElements());
    this.upkeep$ = this.owner.renewals$.pipe(tap(() => this.keyQueues.nudge()));
    this.onWaiting = (entry) => this.keyQueues.blockFor(entry);
    this.settle = (entries, source) => this.keyQueues.accept(entries, source);
  }

  bind(parts: TenureParts): void {
    this.parts = parts;
    const { options, commands, stop, logger, stream } = this.d;
    const { owner, durability } = this;
    const { custody } = parts;
    this.keyQueues = new KeyQueues({
      decide: parts.decideOne,
      custody,
      acks: parts.acks,
      concurrency: options.concurrency,
      // Two reads' worth in flight: the next read is out while this one's entries run.
      room: Math.max(2 * options.batchSize, 2 * options.concurrency),
      stop,
      mayStart: () => owner.valid() && (durability?.mayStart() ?? true),
      ending: () => owner.ending,
      paused: () => parts.pause.anyPaused,
      confirmSettled: durability && ((entry) => this.confirmSettled(entry)),
      ackAgain: async (entries) => {
        await this.ack(entries);
        for (const entry of entries) custody.release(entry);
      },
      inProgress: parts.inProgress,
      // Only while the partition is this consumer's: a stale owner's XCLAIM would take a peer's entries.
      putBack: (entries) => (owner.holds() ? owner.giveBack(entries) : Promise.resolve()),
      recount: (entries) => commands.recount(stream, options.consumer, entries),
      logger,
    });
  }

  maxWaitingRetries(): number {
    return ORDERED_WAITING_RETRIES;
  }

  /** A former owner takes nothing back: what it finds may be the new owner's already. */
  mayTakeBack(): boolean {
    return this.owner.holds();
  }

  reads$({ groups$, selfDrain$, beat$ }: TenureSteps): Observable<StepResult> {
    const { stop, options } = this.d;
    const { owner, keyQueues: lanes } = this;
    const standby$ = defer(() => from(owner.beat())).pipe(
      repeat({ delay: () => timer(options.leaseRenewMs).pipe(takeUntil(stop.stopped$)) }),
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
      selfDrain$,
      defer(() => (owner.ending ? EMPTY : ownedBeats$)),
    );
    const cycle$ = concat(
      standby$,
      defer(() => (owner.owned && !stop.stopped ? owned$ : EMPTY)),
      defer(() => this.release()).pipe(ignoreElements()),
    );
    return cycle$.pipe(repeat({ delay: () => (stop.stopped ? EMPTY : NEXT_BEAT) }));
  }

  nudge(): void {
    this.keyQueues.nudge();
  }

  /** Stopped during a backoff, mid-cycle: what the lanes run finishes and is acked before the owner key goes; then it leaves the share-out. */
  async finish(): Promise<void> {
    const { stop, logger, stream } = this.d;
    await stop.bounded(this.keyQueues.settled(), () => 'the handlers in hand', logger);
    await stop.bounded(this.parts.acks.flush(), () => 'the last ack', logger).catch(() => undefined);
    await stop
      .bounded(this.owner.release(true), () => 'leaving the partition share-out', logger)
      .catch((err: unknown) => logger.warn(`could not leave the share-out of "${stream}": ${describeError(err)}`));
  }

  view(): OrderingView {
    return {
      ...this.owner.view(),
      blockedKeys: this.keyQueues.blockedKeys(),
      held: this.keyQueues.held,
      ...(this.durability ? { durability: this.durability.view() } : {}),
    };
  }

  /** The lanes' running entries finish (and their acks are confirmed); what they queued is dropped, to be read again. */
  private async quiesce(): Promise<void> {
    await this.keyQueues.settled();
    this.keyQueues.clear();
  }

  /**
   * The owned phase is over: nothing of the partition is in hand here any more (running entries
   * finished and acked, the read-ahead answered, what was queued left pending for the next owner,
   * who takes over all of it, with the delivery counts they had before this owner read them), then
   * the owner key goes.
   */
  private async release(): Promise<void> {
    const { owner, keyQueues: lanes } = this;
    const { parker, acks, custody } = this.parts;
    await lanes.settled();
    const ahead = await parker.dropAhead();
    await acks.flush().catch(() => undefined);
    const fenced = lanes.fenced;
    const unstarted = [...lanes.clear(), ...ahead.filter((e) => e.fields !== null)];
    custody.restart();
    custody.forget(this.d.stream);
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
            `could not put back the delivery counts of ${unstarted.length} entries of "${this.d.stream}": ${describeError(err)}`,
          ),
        );
    await owner.release(false);
  }

  /**
   * The ack: fenced (a stale owner's is refused). With durable acks it waits for the replicas too;
   * not confirmed, a hold sends it again (an ack is idempotent, and with it the wait covers it on
   * whichever master answers now) until they confirm, the partition changes hands or the reader
   * stops; carrying on, it returns (degraded). What the first round trip found short is what counts.
   */
  async ack(entries: readonly StreamEntry[]): Promise<ShortAck[]> {
    const { owner, durability } = this;
    const { stream, durable } = this.d;
    const ids = entries.map((e) => e.id);
    const ackDelete = this.parts.offer.ackDelete;
    if (!durability || !durable) return this.d.commands.ackFenced(stream, ids, owner.fence, ackDelete);
    let first: ShortAck[] | undefined;
    for (;;) {
      const wait = durability.waitsOnAcks() ? durability.wanted : undefined;
      const { short, confirmed } = await durable.ackFenced(stream, ids, owner.fence, ackDelete, wait);
      first ??= short;
      if (!confirmed || durability.record(confirmed) || !(await this.holdOn(confirmed))) return first;
    }
  }

  /** A dead-letter move with durable acks: settled once the replicas have it (a move lost with a master restarts the loop). */
  private async confirmSettled(entry: StreamEntry): Promise<void> {
    const durability = this.durability!;
    for (;;) {
      if (!durability.waitsOnAcks()) return;
      const { pending, confirmed } = await this.d.durable!.confirmSettled(
        entry.stream,
        [entry.id],
        this.owner.fence,
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
    const { stop } = this.d;
    if (stop.stopped || !this.owner.holds()) return false;
    // A wait refused at once (WAITAOF on a master without AOF) would spin: the next try after the wait's time.
    if (confirmed.refused) await firstValueFrom(race(timer(this.durability!.wanted.timeoutMs), stop.stopped$), { defaultValue: 0 });
    return !stop.stopped && this.owner.holds();
  }

  /**
   * How long the owned partition's loop has gone without progress (a step answered, an entry settled);
   * 0 while it waits on something it chose: handlers running, a hold of its durable acks.
   */
  private stalledForMs(): number {
    const lanes = this.keyQueues;
    if (!lanes || lanes.runningCount > 0 || (this.durability && !this.durability.mayStart())) return 0;
    return performance.now() - Math.max(this.d.lastStepAt(), lanes.lastTurnEndAt);
  }
}
