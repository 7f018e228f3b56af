import type { Logger } from '../ports.js';
import {
  concat,
  concatMap,
  defer,
  EMPTY,
  expand,
  finalize,
  from,
  ignoreElements,
  Observable,
  of,
  repeat,
  retry,
  Subject,
  takeUntil,
  tap,
  timer,
} from 'rxjs';
import type { ResolvedBatchOptions } from '../options/batch-options.js';
import { MAX_BATCH_SIZE, type ResolvedServerOptions } from '../options/server-options.js';
import type { Lanes } from '../redis/lanes.js';
import { isErrorReply, isRetryable, UnsupportedServerError } from '../redis/redis-errors.js';
import { compareIds } from '../redis/replies.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { groupIds, type StreamEntry } from '../redis/stream-entry.js';
import { AckPipeline } from './ack-pipeline.js';
import { settleBatch, type BatchProgress, type BatchSettlerDeps } from './batch-settler.js';
import { DeliveryMarks } from './delivery-marks.js';
import { describeError } from '../describe-error.js';
import { escapeControl } from '../escape-control.js';
import { within } from '../within.js';
import { Lease } from './lease.js';
import { PendingAudit } from './pending-audit.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';

/** The oldest server this package is tested on (CI runs Redis 7.0): XAUTOCLAIM's 3-element reply, XINFO's lag. */
const MIN_SERVER = { major: 7, minor: 0 };

/** How long stopping may wait on Redis to wake a park, or to take entries back after a hung handler. */
const WAKE_WITHIN_MS = 1000;

const NEXT_BEAT = of(0);

/** Without a claim, XAUTOCLAIM calls per stream per beat (each scans ~10 × COUNT PEL entries). */
const MAX_EMPTY_SCANS_PER_BEAT = 4;

export interface ConsumerLoopDeps {
  /** Full stream keys this consumer reads. */
  streams: readonly string[];
  options: ResolvedServerOptions;
  commands: StreamCommands;
  lanes: Lanes;
  /** Decides one entry (`'acked'`: succeeded, to be acked); rejects only when Redis failed (the entry is then still pending). */
  settle: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  onSettled: (event: SettledEvent) => void;
  /**
   * Set for a batch handler's streams: entries go to `decide` up to `maxSize` at a time, and a
   * park that returns a batch not yet full waits up to `maxWaitMs` for more.
   */
  batch?:
    (ResolvedBatchOptions & { decide: (entries: readonly StreamEntry[], source: DeliverySource) => Promise<SettledEvent[]> }) | undefined;
  logger: Logger;
  onDeleted: (stream: string, ids: string[]) => void;
  onError: (error: unknown, retryInMs: number) => void;
  /** On a cluster MOVED/ASK are a moved slot, retried; on one node they say the URL names a cluster node. */
  onCluster?: boolean;
  /** Called once the groups exist, every time the loop (re)starts. */
  onReady: () => void;
  /**
   * Resolves once the transport has started (every reader's groups exist, `listen` answered):
   * no handler runs before, as with one reader. Default: at once.
   */
  started?: Promise<void>;
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
}

/** The group no longer lists this consumer although it has read from it, or is gone: it was lost and re-created. */
class GroupLostError extends Error {
  constructor(streams: string[]) {
    super(
      `the group of ${streams.map((s) => `"${s}"`).join(', ')} no longer lists this consumer, or is gone (lost and re-created?): rejoining`,
    );
    this.name = 'GroupLostError';
  }
}

/**
 * One consumer's loop:
 *   self-drain: XREADGROUP … STREAMS k… 0 until empty (own un-acked work, at once)
 *   then every beat: reclaim (XAUTOCLAIM of idle peer entries) → park (XREADGROUP BLOCK … >)
 *   (after a full batch, the next park is read ahead while the batch is settled)
 * Each fetched batch is settled `concurrency` entries at a time and acked in one round trip;
 * `stop()` is honoured between entries only.
 * Any Redis failure restarts the pipeline (groups re-created, own PEL re-drained) after a backoff.
 */
export class ConsumerLoop {
  private stopping = false;
  private abandoned = false;
  private readonly stop$ = new Subject<void>();
  private readonly lease: Lease;
  private readonly audit: PendingAudit;
  /** Short acks not yet explained (see PendingAudit.shortAck): the next beat looks into them. */
  private readonly shortAcks: [stream: string, entries: StreamEntry[], missing: number][] = [];
  private readonly acks: AckPipeline;
  private readonly reclaimCursor = new Map<string, string>();
  private lastReclaimAt = 0;
  private parked: Promise<unknown> | undefined;
  /** The next park's read, already sent (`readAhead`). */
  private ahead: Promise<StreamEntry[]> | undefined;
  private readonly marks = new DeliveryMarks();
  private readonly inProgress = new Set<BatchProgress>();
  /** Streams whose group was found lost without an error to say so (see PendingAudit). */
  private readonly lossSeen = new Set<string>();

  private readonly batchDeps: BatchSettlerDeps;
  private lastBeatAt: number | undefined;
  private failingSince: number | undefined;
  private refusal: string | undefined;
  /** An ack failed since the last flush: the next beat surfaces it. */
  private ackFailed = false;
  /** When each batch handler's read came back (see fill). */
  private readonly arrivals = new WeakMap<readonly StreamEntry[], number>();
  /**
   * COUNT of every read and reclaim: `batchSize`; for a batch handler, enough for `concurrency`
   * calls of `maxSize` (at most MAX_BATCH_SIZE, unless one call alone needs more).
   */
  private readonly count: number;

  constructor(private readonly d: ConsumerLoopDeps) {
    const onSettled = (event: SettledEvent, confirmedAt?: number) => {
      if (this.abandoned) return;
      this.marks.settled(event, confirmedAt);
      d.onSettled(event);
    };
    const { batch } = d;
    this.count = batch ? Math.max(batch.maxSize, Math.min(batch.maxSize * d.options.concurrency, MAX_BATCH_SIZE)) : d.options.batchSize;
    this.lease = new Lease(
      d.commands,
      d.options.consumer,
      d.options.leaseRenewMs,
      d.logger,
      (stream, lost) => void this.audit.heldLost(stream, lost),
    );
    this.audit = new PendingAudit({
      commands: d.commands,
      lease: this.lease,
      marks: this.marks,
      consumer: d.options.consumer,
      minIdleMs: d.options.minIdleMs,
      leaseRenewMs: d.options.leaseRenewMs,
      logger: d.logger,
      onDeleted: d.onDeleted,
      onGroupLost: (stream) => {
        this.lossSeen.add(stream);
        this.wakePark();
      },
      onDue: () => this.wakePark(),
    });
    this.acks = new AckPipeline(
      d.commands,
      this.lease,
      onSettled,
      (stream, entries, missing) => {
        this.shortAcks.push([stream, entries, missing]);
        this.wakePark();
      },
      () => {
        // The next beat flushes it (and restarts): wake a park rather than wait for a batch that may never come.
        this.ackFailed = true;
        this.wakePark();
      },
    );
    this.batchDeps = {
      lease: this.lease,
      acks: this.acks,
      settle: d.settle,
      batchHandler: batch && { maxSize: batch.maxSize, decide: batch.decide },
      onSettled,
      concurrency: d.options.concurrency,
      handBackIdleMs: d.options.minIdleMs,
      stopping: () => this.stopping,
      abandoned: () => this.abandoned,
      inProgress: this.inProgress,
    };
  }

  /** Full keys of the streams this loop reads. */
  get streams(): readonly string[] {
    return this.d.streams;
  }

  /** Emits the number of entries each step fetched; completes after `stop()`. */
  run(): Observable<number> {
    const { retryInitialDelayMs, retryMaxDelayMs } = this.d.options;
    // Stopped before the gate opened (close() during the start): the gate never opens, go straight to finish.
    const started$ = defer(() => (this.stopping ? EMPTY : from(this.d.started ?? Promise.resolve()).pipe(takeUntil(this.stop$))));
    const loop$ = defer(() => this.ensureGroups()).pipe(
      concatMap(() => started$),
      concatMap(() => concat(this.selfDrain$(), this.beats$())),
      tap(() => this.beat()),
      retry({
        resetOnSuccess: true,
        delay: (error: unknown, attempt: number) => {
          if (this.stopping) return EMPTY;
          // An error reply proves Redis is reachable: only a missing answer counts toward "unreachable".
          if (!isErrorReply(error)) this.failingSince ??= Date.now();
          else {
            this.failingSince = undefined;
            if (!isRetryable(error, this.d.onCluster)) this.refusal = describeError(error);
          }
          const retryInMs = isRetryable(error, this.d.onCluster)
            ? Math.min(retryMaxDelayMs, retryInitialDelayMs * 2 ** (attempt - 1))
            : retryMaxDelayMs;
          this.d.onError(error, retryInMs);
          return timer(retryInMs).pipe(takeUntil(this.stop$));
        },
      }),
    );
    return concat(loop$, defer(() => this.finish()).pipe(ignoreElements())).pipe(
      finalize(() => {
        this.audit.stop();
        this.lease.stop();
      }),
    );
  }

  /** After the last beat: a read-ahead batch goes back, and the last ack is confirmed (and reported). */
  private async finish(): Promise<void> {
    await this.handBackAhead();
    this.audit.stop();
    await this.acks.flush().catch((err: unknown) => this.d.logger.warn(`last ack failed, its entries stay pending: ${describeError(err)}`));
  }

  vitals(): LoopVitals {
    return { lastBeatAt: this.lastBeatAt, failingSince: this.failingSince, refusal: this.refusal, inHand: this.lease.counts() };
  }

  private beat(): void {
    this.lastBeatAt = Date.now();
    this.failingSince = undefined;
    this.refusal = undefined;
  }

  /** Entries fetched and not yet settled. */
  inHand(): { stream: string; id: string }[] {
    return this.lease.entries();
  }

  /**
   * After `close()` gave up waiting for a hung handler: the entries fetched and not started
   * are handed back (idle set to minIdleMs, so the next peer's beat takes them), and nothing
   * of ours keeps running for the ones in hand (no lease renewal, and a late result is ignored).
   */
  async abandon(): Promise<void> {
    this.stopping = true;
    this.abandoned = true;
    this.audit.stop();
    const begun = [...this.inProgress].flatMap((batch) => batch.entries.slice(0, batch.next));
    const unstarted = this.lease.heldIds(begun);
    this.lease.stop();
    // Best effort, bounded: a paused server must not hold close(); unreturned, they come back after minIdleMs.
    await within(this.lease.handBackIds(unstarted, this.d.options.minIdleMs), WAKE_WITHIN_MS, undefined);
  }

  /** Stop at the next settle point and wake a parked read; the `run()` stream then completes. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.stop$.next();
    await this.wake();
  }

  private async ensureGroups(): Promise<void> {
    // Self-drain must not read entries whose ack is still on its way: it would run them again.
    await this.acks
      .flush()
      .catch((err: unknown) => this.d.logger.warn(`ack before restart failed, its entries run again: ${describeError(err)}`));
    await this.dropAhead();
    this.audit.stop();
    this.shortAcks.length = 0;
    const held = this.lease.heldIds();
    this.lease.stop();
    const { commands, options } = this.d;
    const { major, minor, server } = await commands.serverVersion();
    if (major < MIN_SERVER.major || (major === MIN_SERVER.major && minor < MIN_SERVER.minor)) {
      throw new UnsupportedServerError(
        `needs Redis ${MIN_SERVER.major}.${MIN_SERVER.minor} or later (Valkey 7.2 or later); the server is ${server}`,
      );
    }
    for (const stream of this.d.streams) {
      const startId = await this.groupStartId(stream);
      const created = await commands.ensureGroup(stream, startId).catch((err: unknown) => {
        // Keep Redis' own prefix (WRONGTYPE, NOPERM…) first: retry decisions read it.
        throw new Error(`${err instanceof Error ? err.message : String(err)} (XGROUP CREATE "${options.group}" on stream "${stream}")`, {
          cause: err,
        });
      });
      if (created) this.d.logger.log(`created group "${options.group}" on stream "${stream}" at ${startId}`);
      await this.rejoin(stream, held.get(stream) ?? []);
    }
    this.lease.start();
    this.audit.start();
    this.beat();
    this.d.onReady();
  }

  /**
   * Where a missing group starts. The first time: `groupStartId`. After this consumer has read
   * from the stream (the group was lost: XGROUP DESTROY, a server that lost its data): the
   * highest id delivered to it, so the entries it settled do not run again (what it still
   * owes is re-delivered to it by `rejoin`). A stream that never reached that id is a new
   * stream (deleted and written anew, FLUSHALL, an empty restart): `groupStartId`.
   */
  private async groupStartId(stream: string): Promise<string> {
    const seen = this.marks.highestOf(stream);
    if (seen === undefined) return this.d.options.groupStartId;
    const last = await this.d.commands.lastGeneratedId(stream);
    if (last !== null && compareIds(last, seen) >= 0) return seen;
    this.marks.forget(stream);
    return this.d.options.groupStartId;
  }

  /**
   * After a restart: if the group was lost meanwhile (re-created here or by a peer), take back
   * what this consumer still owed. A group re-created by a peer while this consumer was busy
   * in a handler gives no error (XACK on it answers 0): its short acks say so instead.
   */
  private async rejoin(stream: string, held: readonly string[]): Promise<void> {
    const highest = this.marks.highestOf(stream);
    const force = this.lossSeen.delete(stream);
    if (highest === undefined) return;
    const owed = this.marks.owed(stream, held);
    const { lost, owned } = await this.d.commands.recoverGroup(stream, this.d.options.consumer, highest, owed, force);
    this.marks.keepOwned(stream, owed, owned);
    const untracked = this.marks.takeUntracked(stream);
    if (!lost) return;
    this.d.logger.warn(
      `group "${this.d.options.group}" of stream "${stream}" had lost this consumer's pending entries (the group was re-created, or XGROUP DELCONSUMER deleted the consumer): it resumes after ${highest} and took back ${owned.length} of the ${owed.length} entries it still owed` +
        (untracked > 0 ? `; ${untracked} more failed entries were past what it tracks and will not be retried` : ''),
    );
  }

  /** Step 1: this consumer's own pending entries, oldest first, until a read comes back empty. */
  private selfDrain$(): Observable<number> {
    const next = new Map(this.d.streams.map((s) => [s, '0']));
    const step$ = defer(async () => {
      const streams = [...next.keys()];
      if (streams.length === 0 || this.stopping) return 0;
      const { commands, lanes, options } = this.d;
      const entries = await commands.readGroup(
        lanes.command,
        options.consumer,
        streams,
        streams.map((s) => next.get(s)!),
        this.count,
      );
      for (const s of streams) {
        const last = entries.findLast((e) => e.stream === s);
        if (last) next.set(s, last.id);
        else next.delete(s);
      }
      this.marks.delivered(entries);
      const live = await this.dropDeleted(entries);
      this.lease.hold(live);
      await this.settleBatch(await this.withDeliveryCounts(live), 'drain');
      return entries.length;
    });
    return step$.pipe(expand((n) => (n > 0 && !this.stopping ? step$ : EMPTY)));
  }

  /** Steps 2 and 3, repeated until stopped. */
  private beats$(): Observable<number> {
    // One async step per beat: under load a beat is one batch, and every operator here is paid per batch.
    const beat$ = defer(async () => {
      // Under load neither has anything to do: skip their promises (two hops per batch).
      if (this.ackFailed || this.lossSeen.size > 0 || this.shortAcks.length > 0) await this.checkGroups();
      const retried = this.audit.anyDue() && !this.stopping ? await this.retryOwed() : 0;
      const reclaimed = this.reclaimDue() ? await this.reclaim() : 0;
      return retried + reclaimed + (await this.park());
    });
    return beat$.pipe(repeat({ delay: () => (this.stopping ? EMPTY : NEXT_BEAT) }));
  }

  /**
   * A failed ack restarts the pipeline (self-drain takes its entries again); short acks are
   * explained first, and a group found lost restarts it too, whose rejoin takes back what the
   * lost group owed this consumer.
   */
  private async checkGroups(): Promise<void> {
    if (this.ackFailed && !this.stopping) {
      this.ackFailed = false;
      // Rethrows the failed ack: the loop restarts and self-drain takes its entries again.
      await this.acks.flush();
    }
    for (const [stream, entries, missing] of this.shortAcks.splice(0)) await this.audit.shortAck(stream, entries, missing);
    if (this.lossSeen.size === 0 || this.stopping) return;
    throw new GroupLostError([...this.lossSeen]);
  }

  /**
   * An idle beat lasts blockMs; a busy one (the park returned entries at once) can be far
   * shorter, and an XAUTOCLAIM per batch would cost a round trip each: under load, reclaim
   * at most once per blockMs. Recovery still happens within minIdleMs + blockMs.
   */
  private reclaimDue(): boolean {
    const now = Date.now();
    if (now - this.lastReclaimAt < this.d.options.blockMs) return false;
    this.lastReclaimAt = now;
    return true;
  }

  /** Failed entries of this consumer due for their retry, claimed back and settled. */
  private async retryOwed(): Promise<number> {
    const entries = await this.audit.claimDue();
    this.marks.delivered(entries);
    await this.settleBatch(entries, 'reclaim');
    return entries.length;
  }

  /** Reported once: the audit will not report them again when it meets them. */
  private reportDeleted(stream: string, ids: string[]): void {
    this.audit.deletedElsewhere(stream, ids);
    this.d.onDeleted(stream, ids);
  }

  /** Something for the loop to do now: a parked read ends rather than wait out blockMs. */
  private wakePark(): void {
    if (this.parked) void this.d.lanes.unblock();
  }

  /** Step 2 (when due): take over entries idle past `minIdleMs`, carrying each stream's cursor across beats. */
  private async reclaim(): Promise<number> {
    const { commands, options } = this.d;
    let claimed = 0;
    for (const stream of this.d.streams) {
      for (let emptyScans = 0; !this.stopping && emptyScans < MAX_EMPTY_SCANS_PER_BEAT;) {
        const cursor = this.reclaimCursor.get(stream) ?? '0-0';
        const result = await commands.autoClaim(stream, options.consumer, options.minIdleMs, cursor, this.count);
        this.reclaimCursor.set(stream, result.cursor);
        if (result.deletedIds.length > 0) this.reportDeleted(stream, result.deletedIds);
        // Ours already, fetched and waiting (a read-ahead whose lease lapsed while the event loop
        // was held): the batch that holds them settles them; settling them here too would run them twice.
        const held = result.entries.length > 0 ? this.lease.idsOn(stream) : undefined;
        const claimedNow = result.entries.filter((e) => !held!.has(e.id));
        if (claimedNow.length > 0) {
          claimed += claimedNow.length;
          this.marks.delivered(claimedNow);
          this.lease.hold(claimedNow);
          await this.settleBatch(await this.withDeliveryCounts(claimedNow), 'reclaim');
        } else {
          emptyScans++;
        }
        if (result.cursor === '0-0') break;
      }
    }
    return claimed;
  }

  /**
   * Step 3: wait up to `blockMs` for new entries on the private lane, then settle them. After
   * a full batch (more is waiting) the next park is sent at once (`readAhead`), so Redis
   * serves it while this batch is handled instead of after.
   */
  private async park(): Promise<number> {
    if (this.stopping) return 0;
    const first = await (this.takeAhead() ?? this.parkRead());
    const { batch } = this.d;
    const filling = batch !== undefined && batch.maxWaitMs > 0 && first.length > 0 && first.length < batch.maxSize;
    const entries = filling
      ? await this.fill(first, batch.maxSize, (this.arrivals.get(first) ?? performance.now()) + batch.maxWaitMs)
      : first;
    // Stopped while a batch handler's batch was filling: that batch is in hand, and is settled.
    const inHand = filling && this.stopping ? entries.length : 0;
    if (this.d.options.readAhead && entries.length >= this.count && !this.stopping) this.readAhead();
    try {
      await this.settleBatch(entries, 'new', inHand);
    } finally {
      if (this.stopping) await this.handBackAhead();
    }
    return entries.length;
  }

  /**
   * A batch handler's park that returned fewer than `maxSize` entries: read more (Redis blocks)
   * until it is full or the `deadline` (`maxWaitMs` after the first arrived) has passed.
   * Stopping ends the wait at once; what is in hand is then settled.
   */
  private async fill(entries: StreamEntry[], maxSize: number, deadline: number): Promise<StreamEntry[]> {
    while (entries.length < maxSize && !this.stopping) {
      const leftMs = Math.floor(deadline - performance.now());
      // BLOCK 0 would wait forever.
      if (leftMs < 1) break;
      const more = await this.parkRead(leftMs, maxSize - entries.length);
      if (more.length === 0) break;
      entries = entries.concat(more);
    }
    return entries;
  }

  /** One XREADGROUP … BLOCK … > on the blocking lane; what it returns is leased at once. */
  private async parkRead(blockMs = this.d.options.blockMs, count = this.count): Promise<StreamEntry[]> {
    const { commands, lanes, options } = this.d;
    // Not connected within a beat: an empty park, and the beat goes on. (Connected: no promise to wait on.)
    if (!lanes.readyToPark() && !(await lanes.prepareBlocking(blockMs, this.stop$))) return [];
    if (this.stopping) return [];
    const read = commands.readGroup(
      lanes.blocking,
      options.consumer,
      this.d.streams,
      this.d.streams.map(() => '>'),
      count,
      blockMs,
    );
    this.parked = read;
    try {
      // Redis' answer, however late the event loop gets to it (a busy handler): never dropped.
      const entries = await lanes.awaitPark(read, blockMs);
      this.marks.delivered(entries);
      // Held from arrival: a read-ahead batch may wait longer than minIdleMs for its turn.
      this.lease.hold(entries);
      // A batch handler's wait for more counts from here (a read-ahead may be taken much later).
      if (this.d.batch && entries.length > 0) this.arrivals.set(entries, performance.now());
      return entries;
    } finally {
      if (this.parked === read) this.parked = undefined;
    }
  }

  /** The read-ahead, if one is out; it is the caller's from now on. */
  private takeAhead(): Promise<StreamEntry[]> | undefined {
    const ahead = this.ahead;
    this.ahead = undefined;
    return ahead;
  }

  private readAhead(): void {
    const ahead = this.parkRead();
    // Awaited by the next park (which reports its failure); until then it must not count as unhandled.
    ahead.catch(() => undefined);
    this.ahead = ahead;
  }

  /** Stopping: a read-ahead batch was never started, so it goes back to the group at once. */
  private async handBackAhead(): Promise<void> {
    if (this.abandoned) return; // abandon() handed it back already
    const entries = (await this.takeAhead()?.catch(() => [])) ?? [];
    if (entries.length > 0) await this.lease.handBack(entries, this.d.options.minIdleMs);
  }

  /**
   * Before a restart: a read-ahead still out is woken and waited for, and its result dropped.
   * Its entries are then in this consumer's PEL, where self-drain finds them: settling them
   * from both would run their handlers twice.
   */
  private async dropAhead(): Promise<void> {
    const ahead = this.takeAhead();
    if (!ahead) return;
    await this.d.lanes.unblock();
    await ahead.catch(() => undefined);
  }

  private settleBatch(entries: readonly StreamEntry[], source: DeliverySource, inHand = 0): Promise<void> {
    return settleBatch(this.batchDeps, entries, source, inHand);
  }

  /**
   * A pending entry trimmed from the stream reads back without fields: nothing is left to
   * handle, so it is reported like XAUTOCLAIM's deleted ids and acked out of the PEL.
   */
  private async dropDeleted(entries: StreamEntry[]): Promise<StreamEntry[]> {
    const deleted = entries.filter((e) => e.fields === null);
    if (deleted.length === 0) return entries;
    for (const [stream, ids] of groupIds(deleted)) this.reportDeleted(stream, ids);
    await this.d.commands.ackMany(deleted);
    return entries.filter((e) => e.fields !== null);
  }

  /**
   * Drained and reclaimed entries were delivered before: their exact counts (one XPENDING per
   * entry, one round trip). An entry that is no longer this consumer's (a peer took it, or it
   * was acked meanwhile) is not ours to settle: it is dropped from the batch, never given a
   * made-up count.
   */
  private async withDeliveryCounts(entries: StreamEntry[]): Promise<StreamEntry[]> {
    const rows = await this.d.commands.pendingRows(entries);
    const kept: StreamEntry[] = [];
    entries.forEach((e, i) => {
      const row = rows[i];
      if (row && row.consumer === this.d.options.consumer) {
        e.deliveryCount = row.deliveryCount;
        kept.push(e);
        return;
      }
      this.lease.drop(e);
      this.d.logger.warn(
        `entry ${e.id} of "${e.stream}" is no longer pending under this consumer (${row ? `now "${escapeControl(row.consumer)}"'s` : 'acked'}): skipped`,
      );
    });
    return kept;
  }

  /**
   * Ends a park now rather than after `blockMs`. The read may not have reached the server yet,
   * so retry briefly; at most a second in all, however slow Redis is to answer (a paused server).
   */
  private async wake(): Promise<void> {
    const deadline = Date.now() + WAKE_WITHIN_MS;
    while (this.parked && Date.now() < deadline) {
      if (await within(this.d.lanes.unblock(), deadline - Date.now(), false)) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    // Could not reach the server to unblock: drop the blocking lane, the read fails and the loop ends.
    if (this.parked) this.d.lanes.dropBlocking();
  }
}
