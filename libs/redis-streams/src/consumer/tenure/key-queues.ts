import { performance } from 'node:perf_hooks';
import { orderingKeyOf } from '../../codec/ordering-key.js';
import { isFenced } from '../../redis/replies/redis-errors.js';
import type { Logger } from '../../ports.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { AckPipeline } from '../settle/ack-pipeline.js';
import type { BatchProgress } from '../settle/batch-progress.js';
import type { Custody } from '../custody/custody.js';
import type { DeliverySource, SettledEvent } from '../settle/settled-event.js';
import type { StopSignal } from '../stop-signal.js';
import { NotYet } from '../settle/admission.js';
import { RecountBatch } from '../settle/recount-batch.js';
import { settleInDoubt } from '../settle/settle-sent.js';

/** Entries held behind failed ones (their keys blocked) before intake pauses: memory stays bounded when one key keeps failing under traffic. */
export const MAX_BLOCKED_ENTRIES = 10_000;

/**
 * Ids of entries this owner handled and acked that it remembers (the newest), to know a re-delivery of one:
 * a failover that lost the group's last deliveries or acks (replication is asynchronous) hands
 * them back, and running one again after a later entry of its key would break the key's order.
 */
export const SETTLED_IDS_KEPT = 100_000;

export interface KeyQueuesDeps {
  /** Decides one entry (checks, handler, outcome); rejects only when Redis failed (the entry is then still pending). */
  decide: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  custody: Pick<Custody, 'release' | 'settledUnacked'>;
  acks: Pick<AckPipeline, 'send' | 'flush'>;
  concurrency: number;
  /** Entries runnable or running (not behind a failure) before `accept` makes the fetch wait. */
  room: number;
  stop: StopSignal;
  /** Whether a handling may start now (this consumer owns the partition, within its lease, and its durable acks allow). */
  mayStart: () => boolean;
  /** The stream is paused for the group (PauseWatch): nothing starts; what the queues hold waits, uncounted. */
  paused: () => boolean;
  /** The owned phase is ending (lost, asked to release, lease run out): a fetch must not wait for room. */
  ending: () => boolean;
  /** Durable acks: a dead-letter move counts as settled once this resolves (confirmed on the replicas, or carrying on). */
  confirmSettled?: ((entry: StreamEntry) => Promise<void>) | undefined;
  /** Acks entries read again that this owner settled already (see SETTLED_IDS_KEPT), without running them. */
  ackAgain: (entries: readonly StreamEntry[]) => Promise<void>;
  /** Handlers running, for the stuck watch and an abandon (see BatchProgress). */
  inProgress: Set<BatchProgress>;
  /** Puts back the delivery counts of read entries that wait (see KeyQueues.holdUncounted). */
  putBack: (entries: readonly StreamEntry[]) => Promise<void>;
  /** Gives entries put back the count they were read with, as they start, if still this consumer's (StreamCommands.recount): the ids it did. */
  recount: (entries: readonly StreamEntry[]) => Promise<string[]>;
  logger: Logger;
}

/** One key's queue: its entries in id order, the one running, and the failed one it waits for. */
interface Queued {
  entry: StreamEntry;
  source: DeliverySource;
}

interface KeyQueue {
  readonly key: string;
  entries: Queued[];
  /** An entry of this key is in a handler or its ack is unconfirmed. */
  busy: boolean;
  /** The id of the key's failed entry, waiting for its retry: nothing later of the key runs before it settles. */
  blockedBy: string | undefined;
  blockedSince: number;
  /** Its blocking entry waits for its key's rate limit, not a retry of a failure: what waits behind it is not counted. */
  limited: boolean;
}

/** A key waiting behind a failed entry, as health and inspect show it. */
export interface BlockedKey {
  key: string;
  /** The failed entry it waits for. */
  id: string;
  /** Its later entries held here. */
  waiting: number;
  /** ms since it failed. */
  forMs: number;
}

/**
 * An ordered reader's way to settle: entries run in queues by key (the `partitionKey` field), each queue
 * one entry at a time in id order, up to `concurrency` queues at once. A key's next entry starts
 * only once the previous one's ack is confirmed (or it was dead-lettered): an ack lost with the
 * connection is run again before anything later of its key. A failure blocks its key alone: its
 * later entries wait here while it waits for its retry (the schedule, the same id), and run once
 * it settles (acked, or dead-lettered). Fetch steps hand entries over with `accept`, which returns
 * once there is room, so other keys keep flowing while a queue runs or waits.
 */
export class KeyQueues {
  private readonly queues = new Map<string, KeyQueue>();
  /** Queues with an entry that may run now, in the order they became ready. */
  private readonly ready: KeyQueue[] = [];
  /** Ids of every entry in a queue (queued or running; one stream a reader): a re-delivery of one is not run twice. */
  private readonly queuedIds = new Set<string>();
  /** Handlers running (what `concurrency` bounds). */
  private running = 0;
  /** Entries between their start and the end of their queue's turn (the ack confirmed included). */
  private active = 0;
  /** Entries in queues not blocked (queued or running). */
  private flowing = 0;
  private blocked = 0;
  private roomWaiters: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  /** Acks to send together: one round trip for every queue that finished meanwhile. */
  private ackQueue: { queue: KeyQueue; entry: StreamEntry; event: SettledEvent }[] = [];
  private acking = false;
  /** A Redis failure (an ack, a dead-letter move): the loop restarts; until then no queue starts. */
  private failure: unknown;
  /** An ack was refused (FENCED): another consumer owns the partition now; no queue starts, the owned phase ends. */
  private fencedOut = false;
  /** Entries whose delivery count was put back while they wait behind their key's limit (their ids). */
  private readonly uncounted = new Set<string>();
  /** Entries to put back in the next round trip. */
  private toPutBack: StreamEntry[] = [];
  /** The last put-back sent (it never rejects): a recount goes after it, whatever connection carries it. */
  private puttingBack: Promise<void> = Promise.resolve();
  /** Uncounted entries starting now, counted again in one round trip (see recount). */
  /** Ids this owner handled and acked, newest last, at most SETTLED_IDS_KEPT: kept across restarts of the loop, forgotten with the partition. */
  private readonly settledIds = new Set<string>();
  private turnEndedAt = 0;
  /** Re-deliveries of settled entries, acked again in the next round trip. */
  private againQueue: StreamEntry[] = [];

  /** Uncounted entries starting now, counted again in one round trip, after any put-back on its way. */
  private readonly recounts: RecountBatch;

  constructor(private readonly d: KeyQueuesDeps) {
    this.recounts = new RecountBatch(d.recount, () => this.puttingBack);
  }

  /** Hands fetched entries to their queues; resolves once there is room for more (or the loop must restart: it rejects). */
  async accept(entries: readonly StreamEntry[], source: DeliverySource): Promise<void> {
    this.rethrow();
    for (const entry of entries) this.enqueue(entry, source);
    this.pump();
    while (!this.hasRoom()) {
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
      this.rethrow();
    }
  }

  /** A failure a queue met (Redis: an ack, a dead-letter move) ends the loop's current run: it restarts, and self-drain takes over. */
  rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** An ack was refused as a stale owner's: the reader gives the partition up (no error: a peer owns it now). */
  get fenced(): boolean {
    return this.fencedOut;
  }

  /** A failed entry (adopted after a restart or a takeover) waits for its retry: its key waits with it. */
  blockFor(entry: StreamEntry): void {
    const queue = this.queueOf(orderingKeyOf(entry));
    if (queue.blockedBy !== undefined) return;
    this.update(queue, () => {
      queue.blockedBy = entry.id;
      queue.blockedSince = performance.now();
    });
  }

  /** Resolves once no handler runs and no ack is in flight (what is queued stays queued: nothing starts once stopping or not owning). */
  async settled(): Promise<void> {
    while (this.active > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** After `settled()`: every queue forgotten (a restart: self-drain reads the pending entries again, in id order); the entries dropped, by queue. */
  clear(): StreamEntry[] {
    const dropped: StreamEntry[] = [];
    for (const queue of this.queues.values()) for (const { entry } of queue.entries) dropped.push(entry);
    this.queues.clear();
    this.ready.length = 0;
    this.queuedIds.clear();
    this.flowing = this.blocked = 0;
    this.uncounted.clear();
    this.toPutBack = [];
    this.failure = undefined;
    this.fencedOut = false;
    this.wakeRoom();
    return dropped;
  }

  /** The partition is given up: what this owner settled is the next owner's history, not this one's to guard. */
  forgetSettled(): void {
    this.settledIds.clear();
  }

  /** Ownership changed or was renewed, or a pause began or ended: queues held back start if they may (paused: what they hold waits uncounted), and a fetch waiting for room looks again. */
  nudge(): void {
    if (this.d.paused()) for (const queue of this.queues.values()) this.holdUncounted(queue.entries.map((q) => q.entry));
    this.pump();
    this.wakeRoom();
  }

  /** Starts ready queues while slots are free and a handling may start. */
  pump(): void {
    while (this.running < this.d.concurrency && this.ready.length > 0) {
      if (this.failure !== undefined || this.fencedOut || this.d.stop.stopped || !this.d.mayStart() || this.d.paused()) return;
      const queue = this.ready.shift()!;
      if (queue.busy || queue.blockedBy !== undefined || queue.entries.length === 0) continue;
      let next!: Queued;
      this.update(queue, () => {
        next = queue.entries.shift()!;
        queue.busy = true;
      });
      void this.run(queue, next.entry, next.source);
    }
  }

  /** Keys waiting behind a failed entry, longest first. */
  blockedKeys(): BlockedKey[] {
    const now = performance.now();
    return [...this.queues.values()]
      .filter((l) => l.blockedBy !== undefined)
      .map((l) => ({ key: l.key, id: l.blockedBy!, waiting: l.entries.length, forMs: Math.round(now - l.blockedSince) }))
      .sort((a, b) => b.forMs - a.forMs);
  }

  /** Handlers running now. */
  get runningCount(): number {
    return this.running;
  }

  /** performance.now() of the last end of an entry's turn (its ack confirmed, or it settled otherwise). */
  get lastTurnEndAt(): number {
    return this.turnEndedAt;
  }

  /** Entries held in queues (queued or running), blocked ones included. */
  get held(): number {
    return this.flowing + this.blocked;
  }

  private enqueue(entry: StreamEntry, source: DeliverySource): void {
    if (this.settledIds.has(entry.id) && !this.queuedIds.has(entry.id)) {
      // Settled here already (its ack or move lost with a master, or the group set back): never run again.
      this.ackAgainSoon(entry);
      return;
    }
    const queue = this.queueOf(orderingKeyOf(entry));
    if (queue.blockedBy === entry.id) {
      // The failed entry's retry (claimed back when due): it runs first, then what waited behind it.
      this.update(queue, () => {
        queue.blockedBy = undefined;
        queue.limited = false;
        queue.entries.unshift({ entry, source });
      });
    } else {
      // Already in its queue (a reclaim of an entry held here, a re-delivery after the group was set back): it runs
      // once, as the entry held already. This copy is let go: held on, once the first is acked it would look dropped
      // from the pending list to the lease, which would take it back (pending again, for nobody to run).
      if (this.queuedIds.has(entry.id)) {
        this.d.custody.release(entry);
        return;
      }
      this.update(queue, () => queue.entries.push({ entry, source }));
      if (queue.limited) this.holdUncounted([entry]);
    }
    // Read while paused (a retry falling due): it waits with the rest, uncounted.
    if (this.d.paused()) this.holdUncounted([entry]);
    this.queuedIds.add(entry.id);
    this.makeReady(queue);
  }

  private queueOf(key: string): KeyQueue {
    let queue = this.queues.get(key);
    if (!queue) {
      queue = { key, entries: [], busy: false, blockedBy: undefined, blockedSince: 0, limited: false };
      this.queues.set(key, queue);
    }
    return queue;
  }

  private makeReady(queue: KeyQueue): void {
    if (!queue.busy && queue.blockedBy === undefined && queue.entries.length > 0 && !this.ready.includes(queue)) this.ready.push(queue);
  }

  /** One entry of a queue (marked busy by pump): settled, acked, and the queue goes on, waits for a retry, or stops until a restart. */
  private async run(queue: KeyQueue, entry: StreamEntry, source: DeliverySource): Promise<void> {
    this.active++;
    this.running++;
    const progress: BatchProgress = { entries: [entry], next: 1, startedAt: [performance.now()] };
    let event: SettledEvent | undefined;
    try {
      if (this.uncounted.has(entry.id)) await this.recount(entry);
      this.d.inProgress.add(progress);
      event = await this.d.decide(entry, source);
    } catch (err) {
      // Redis failed while deciding (a dead-letter move), or before (its recount): still pending; the loop restarts and runs it again first.
      this.failure ??= err;
    }
    this.d.inProgress.delete(progress);
    this.running--;
    if (this.d.stop.abandoned) {
      this.active--;
      return;
    }
    // Another key may run in this slot while this one's ack travels.
    this.pump();
    if (event?.outcome === 'acked' && this.failure === undefined && !this.fencedOut) {
      // The queue goes on once the ack is confirmed (sendAcks ends its turn): one ack for whatever finished meanwhile.
      this.ackQueue.push({ queue, entry, event });
      if (!this.acking) void this.sendAcks();
      return;
    }
    const moved = event?.outcome === 'dead-lettered' || (event?.outcome === 'failed' && settleInDoubt(entry));
    if (moved && this.d.confirmSettled && this.failure === undefined && !this.fencedOut) {
      // Durable acks: the key goes on once the move (one in doubt too) is on the replicas (a move lost with a master is pending again).
      try {
        await this.d.confirmSettled(entry);
      } catch (err) {
        if (isFenced(err)) this.fencedOut = true;
        else this.failure ??= err;
      }
    }
    if (event && event.outcome !== 'acked') {
      this.d.custody.settledUnacked(entry, event);
    }
    this.endTurn(queue, entry, event);
  }

  /**
   * An id this owner handled and acked: a later delivery of it is acked, never run. Not a dead-lettered
   * one: its move lost with a master must be made again (an ack alone would drop it without its letter).
   */
  private remember(id: string): void {
    this.settledIds.add(id);
    if (this.settledIds.size > SETTLED_IDS_KEPT) this.settledIds.delete(this.settledIds.values().next().value!);
  }

  private ackAgainSoon(entry: StreamEntry): void {
    if (this.againQueue.length === 0) queueMicrotask(() => void this.ackAgainNow());
    this.againQueue.push(entry);
  }

  private async ackAgainNow(): Promise<void> {
    const entries = this.againQueue;
    this.againQueue = [];
    if (entries.length === 0) return;
    try {
      await this.d.ackAgain(entries);
      // Rare (a failover's lost writes, an operator's SETID): a line per round trip.
      this.d.logger.warn(
        `${entries.length} entries of "${entries[0]!.stream}" settled here already came back (${entries[0]!.id}${entries.length > 1 ? ' …' : ''}: a failover lost their ack or the group's deliveries, or the group was set back): acked without running them again`,
      );
    } catch (err) {
      if (isFenced(err)) this.fencedOut = true;
      else this.failure ??= err;
    }
  }

  /**
   * The end of an entry's turn in its queue: the queue goes on with its next entry, or waits behind
   * it (failed: until its retry settles), or, after a Redis failure (no event, or its ack's), stops:
   * nothing more starts (pump checks) until the loop restarts and clears.
   */
  private endTurn(queue: KeyQueue, entry: StreamEntry, event: SettledEvent | undefined): void {
    this.turnEndedAt = performance.now();
    this.queuedIds.delete(entry.id);
    this.uncounted.delete(entry.id);
    this.update(queue, () => {
      queue.busy = false;
      // Not for one whose dead-letter move may have run (never retried here: see settleInDoubt).
      if (event?.outcome === 'failed' && !settleInDoubt(entry)) {
        queue.blockedBy = entry.id;
        queue.blockedSince = performance.now();
        queue.limited = event.error instanceof NotYet;
      }
    });
    if (queue.limited && queue.blockedBy === entry.id) this.holdUncounted(queue.entries.map((q) => q.entry));
    if (queue.entries.length === 0 && queue.blockedBy === undefined) this.queues.delete(queue.key);
    else this.makeReady(queue);
    this.active--;
    this.pump();
    this.wakeRoom();
    this.wakeIdle();
  }

  /** Sends the acks of entries that finished (one round trip for all that finished meanwhile); each queue's turn ends once Redis answered. */
  private async sendAcks(): Promise<void> {
    this.acking = true;
    while (this.ackQueue.length > 0) {
      const batch = this.ackQueue.splice(0);
      try {
        await this.d.acks.send(
          batch.map((a) => a.entry),
          batch.map((a) => a.event),
        );
        await this.d.acks.flush();
      } catch (err) {
        if (isFenced(err)) {
          this.fencedOut = true;
          this.d.logger.warn(
            `${err instanceof Error ? err.message : String(err)}: ${batch.length} handled entries left pending for its owner`,
          );
        } else this.failure ??= err;
      }
      for (const a of batch) {
        if (this.failure === undefined && !this.fencedOut) this.remember(a.entry.id);
        this.endTurn(a.queue, a.entry, a.event);
      }
    }
    this.acking = false;
  }

  /**
   * Entries read that wait behind their key's rate limit (for as long as the limit takes), or through a
   * pause, get their delivery count put back, once each, in one round trip for those met meanwhile: a
   * crash of this worker then leaves them as they were before this read, and the next owner's read counts
   * them once, as the wait itself counts nothing (a failure's wait is the failure's, and keeps its count).
   * Each is counted again as it starts (recount).
   */
  private holdUncounted(entries: readonly StreamEntry[]): void {
    const fresh = entries.filter((e) => !this.uncounted.has(e.id));
    if (fresh.length === 0) return;
    for (const e of fresh) this.uncounted.add(e.id);
    if (this.toPutBack.length === 0) queueMicrotask(() => void this.putBackNow());
    this.toPutBack.push(...fresh);
  }

  private async putBackNow(): Promise<void> {
    const entries = this.toPutBack;
    this.toPutBack = [];
    if (entries.length === 0) return;
    // Set before any await: a recount queued after this put-back finds it.
    this.puttingBack = this.d.putBack(entries).catch((err: unknown) => {
      this.d.logger.warn(
        `could not put back the delivery counts of ${entries.length} entries waiting in their key queues (a pause, or their key's rate limit): ${err instanceof Error ? err.message : String(err)}`,
      );
    });
    await this.puttingBack;
  }

  /**
   * An entry whose count was put back (it waited: a pause, its key's limit) is counted again as it starts,
   * with the count it was read with: otherwise its run costs no delivery, so `maxDeliveries` lets it run once
   * more, and a kill -9 during it makes its next run look like a first. One round trip for the entries that
   * start together, after any put-back on its way. Rejects when Redis failed, or the entry is no longer
   * pending under this consumer (an operator's XCLAIM or XACK): the loop restarts, and self-drain decides.
   */
  private async recount(entry: StreamEntry): Promise<void> {
    await this.recounts.count(entry);
    this.uncounted.delete(entry.id);
  }

  /** Entries of a queue counted in the tallies: queued, and the one running or being acked. */
  private static weight(queue: KeyQueue): number {
    return queue.entries.length + (queue.busy ? 1 : 0);
  }

  /** Every change of a queue goes through here: its entries move between the flowing and blocked tallies. */
  private update(queue: KeyQueue, change: () => void): void {
    if (queue.blockedBy === undefined) this.flowing -= KeyQueues.weight(queue);
    else this.blocked -= KeyQueues.weight(queue);
    change();
    if (queue.blockedBy === undefined) this.flowing += KeyQueues.weight(queue);
    else this.blocked += KeyQueues.weight(queue);
  }

  private hasRoom(): boolean {
    // The owned phase must end (a Redis failure, fenced, stopping, not owning or asked to give the partition up), or
    // nothing may start (paused): the fetch step must not wait for room that never comes. A hold (durable acks)
    // waits for room like any other.
    if (this.failure !== undefined || this.fencedOut || this.d.stop.stopped || this.d.ending() || this.d.paused()) return true;
    return this.flowing < this.d.room && this.blocked < MAX_BLOCKED_ENTRIES;
  }

  private wakeRoom(): void {
    if (!this.hasRoom()) return;
    for (const wake of this.roomWaiters.splice(0)) wake();
  }

  private wakeIdle(): void {
    if (this.active > 0) return;
    for (const wake of this.idleWaiters.splice(0)) wake();
  }
}
