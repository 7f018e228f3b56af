import { defer, firstValueFrom, merge, Observable, race, timer } from 'rxjs';
import type { FetchCommands } from '../../redis/read/fetch-commands.js';
import type { Lanes } from '../../redis/connection/lanes.js';
import { ParkLostError } from '../../redis/connection/park-watchdog.js';
import type { StreamEntry } from '../../stream-entry.js';
import { dropDeleted, withDeliveryCounts, withoutWaiting, type ArrivalDeps } from './fetched-entries.js';
import { within } from '../../within.js';
import type { SettleFetched } from '../settle/batch-settler.js';
import type { Custody } from '../custody/custody.js';
import type { StepResult } from '../watch/loop-vitals.js';
import { ReadAhead } from './read-ahead.js';
import type { StopSignal } from '../stop-signal.js';
import { throughGates, type ReadAsk, type ReadGate, type ReadNext, type ReadResult } from '../intake/read-gate.js';

/** What the park reads on, holds and hands its entries to. */
export interface ParkerDeps extends ArrivalDeps {
  stop: StopSignal;
  streams: readonly string[];
  /** COUNT of each read. */
  count: number;
  blockMs: number;
  /** Send the next park while a full batch is handled. */
  readAhead: boolean;
  /** The reader's own lanes: the park blocks on its blocking lane. */
  lanes: Pick<Lanes, 'unblock' | 'dropBlocking' | 'readyToPark' | 'prepareBlocking' | 'blocking' | 'awaitPark'>;
  fetch: Pick<FetchCommands, 'readGroup'>;
  custody: ArrivalDeps['custody'] & Pick<Custody, 'received' | 'heldOn' | 'msUntilDue' | 'handBack'>;
  /** The reader's intake: the gates each park's read goes through, in order (a pause, a rate limit). */
  gates: readonly ReadGate[];
  /** A batch handler's reader: a park not yet full waits up to `maxWaitMs` for more, up to `maxSize`. */
  batch?: { maxSize: number; maxWaitMs: number } | undefined;
  settle: SettleFetched;
}

/** Whether a reclaim sweep is under way (see Reclaimer.busy). */
export interface Sweeping {
  readonly busy: boolean;
}

/** The start id of a one-stream park: new entries only (one array for every park). */
const NEW_ENTRIES: readonly string[] = ['>'];

/** Tries of a wake whose UNBLOCK found no parked read yet (2 ms apart). */
const WAKE_TRIES = 10;

/** How long stopping may wait on Redis to wake a park. */
const WAKE_WITHIN_MS = 1000;

/**
 * Step 3 of a beat: wait up to `blockMs` for new entries on the reader's blocking lane
 * (XREADGROUP … BLOCK … >), then settle them. After a full batch (more is waiting) the next
 * park is sent at once (read-ahead), so Redis serves it while this batch is handled instead of
 * after. A batch handler's batch not yet full waits up to `maxWaitMs` for more (fill). On a
 * server with `XREADGROUP … CLAIM` the read also claims entries idle past `minIdleMs` (a dead
 * peer's), in the same round trip: they are settled first, as a reclaim's would be.
 */
export class Parker {
  /** Emits what the park fetched (and settled). */
  readonly step$: Observable<StepResult> = defer(() => this.park());

  /**
   * Parks one after another, each park's result emitted as `step$`'s, for as long as `more()` says the beat has
   * nothing else to do; then completes (the beat's next round does the rest). Under load a beat is a park after a
   * park: one subscription for the run of them, not one per batch (per-batch code is compiled late and dearly,
   * see docs/benchmarks.md, 2026-12-06). A failed park errors it, as `step$`; unsubscribed, nothing more is emitted.
   */
  parks$(more: () => boolean): Observable<StepResult> {
    return new Observable<StepResult>((subscriber) => {
      let closed = false;
      const run = async (): Promise<void> => {
        do {
          const result = await this.park();
          if (closed) return;
          subscriber.next(result);
        } while (!closed && more());
        subscriber.complete();
      };
      run().catch((err: unknown) => subscriber.error(err));
      return () => {
        closed = true;
      };
    });
  }
  private parked: Promise<unknown> | undefined;
  /** The next park's read, already sent (`readAhead`). */
  private readonly ahead = new ReadAhead<StreamEntry[]>((entries) => entries);
  /** When each batch handler's read came back (see fill). */
  private readonly arrivals = new WeakMap<readonly StreamEntry[], number>();

  /** maxWaitingRetries was reached at the last park (logged once until it is left). */
  private overCap = false;
  /** The last park brought entries taken past a gate the stop kept from closing (see ReadResult.inHand). */
  private takenPastGate = false;
  /** A park's read through the intake's gates. */
  private readonly gatedRead: ReadNext;
  /** What ends a gate's wait: the stop, or a gate's own change. */
  private readonly wake$: Observable<unknown>;

  constructor(
    private readonly d: ParkerDeps,
    /** A reclaim sweep is under way: parks between its rounds do not block (see Reclaimer). */
    private readonly sweep: Sweeping = { busy: false },
  ) {
    this.gatedRead = throughGates(d.gates, (ask) => this.read(ask));
    this.wake$ = merge(d.stop.stopped$, ...d.gates.flatMap((g) => (g.changed$ ? [g.changed$] : [])));
  }

  /** Something for the loop to do now: a parked read ends rather than wait out blockMs. */
  wakePark(): void {
    const parked = this.parked;
    if (!parked) return;
    void (async () => {
      // The read may not be blocked at the server yet (UNBLOCK then finds nothing): try again a few times,
      // or Redis ends the BLOCK at its timeout, up to 100 ms late (hz 10) — a retry due now would wait that long.
      for (let i = 0; i < WAKE_TRIES && this.parked === parked; i++) {
        if (await this.d.lanes.unblock().catch(() => false)) return;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
  }

  /**
   * Ends a park now rather than after `blockMs`. The read may not have reached the server yet,
   * so retry briefly; at most a second in all, however slow Redis is to answer (a paused server).
   */
  async wake(): Promise<void> {
    const { lanes } = this.d;
    const deadline = Date.now() + WAKE_WITHIN_MS;
    while (this.parked && Date.now() < deadline) {
      if (await within(lanes.unblock(), deadline - Date.now(), false)) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    // Could not reach the server to unblock: drop the blocking lane, the read fails and the loop ends.
    if (this.parked) lanes.dropBlocking();
  }

  /** Stopping: a read-ahead batch was never started, so it goes back to the group at once. */
  handBackAhead(): Promise<void> {
    return this.ahead.handBack(this.d, 'hand-back of the read-ahead batch');
  }

  /**
   * Before a restart: a read-ahead still out is woken and waited for, and its result dropped (returned:
   * an ordered reader giving its partition up puts their delivery counts back).
   * Its entries are then in this consumer's PEL, where self-drain finds them: settling them
   * from both would run their handlers twice.
   */
  async dropAhead(): Promise<StreamEntry[]> {
    const ahead = this.ahead.take();
    if (!ahead) return [];
    await this.d.lanes.unblock();
    return ahead.catch(() => []);
  }

  private async park(): Promise<StepResult> {
    const { d } = this;
    const { stop } = d;
    if (stop.stopped) return { step: 'park', fetched: 0 };
    if (this.tooManyWaiting()) {
      // Backpressure: no new work until retries are taken (the next is due by then, or a beat has passed).
      await firstValueFrom(race(timer(this.blockMs()), stop.stopped$));
      return { step: 'park', fetched: 0 };
    }
    const first = await (this.ahead.take() ?? this.parkRead(this.blockMs()));
    const { batch } = d;
    const filling = batch !== undefined && batch.maxWaitMs > 0 && first.length > 0 && first.length < batch.maxSize;
    const entries = filling
      ? await this.fill(first, batch.maxSize, (this.arrivals.get(first) ?? performance.now()) + batch.maxWaitMs)
      : first;
    // Stopped while a batch handler's batch was filling: that batch is in hand, and is settled.
    // Entries a park took past a gate the stop kept from closing (a grant it waited for): in hand, so they run.
    const pastGate = this.takenPastGate;
    this.takenPastGate = false;
    const inHand = (filling || pastGate) && stop.stopped;
    if (d.readAhead && entries.length >= d.count && !stop.stopped) this.readAhead();
    // Delivered before (claimed with the read): a reclaim's. A new entry's count is 1. New ones first:
    // CLAIM serves a dead peer's backlog before them, and that backlog must not hold them back.
    const claimed = entries.filter((e) => e.deliveryCount > 1);
    const fresh = claimed.length === 0 ? entries : entries.filter((e) => e.deliveryCount === 1);
    try {
      await d.settle(fresh, 'new', inHand ? fresh.length : 0);
      if (claimed.length > 0) await this.settleClaimed(claimed, inHand);
    } finally {
      if (stop.stopped) await this.handBackAhead();
    }
    return { step: 'park', fetched: entries.length };
  }

  /**
   * Entries the read claimed (their counts exact, from the reply): one no longer this
   * consumer's is dropped, one waiting for a scheduled retry is adopted (see withoutWaiting).
   */
  private async settleClaimed(claimed: StreamEntry[], inHand: boolean): Promise<void> {
    const { d } = this;
    const live = await withoutWaiting(d, await withDeliveryCounts(d, await dropDeleted(d, claimed), true));
    await d.settle(live, 'reclaim', inHand ? live.length : 0);
  }

  /**
   * A batch handler's park that returned fewer than `maxSize` entries: read more (Redis blocks)
   * until it is full or the `deadline` (`maxWaitMs` after the first arrived) has passed.
   * Stopping ends the wait at once; what is in hand is then settled.
   */
  private async fill(entries: StreamEntry[], maxSize: number, deadline: number): Promise<StreamEntry[]> {
    while (entries.length < maxSize && !this.d.stop.stopped) {
      const leftMs = Math.floor(deadline - performance.now());
      // BLOCK 0 would wait forever.
      if (leftMs < 1) break;
      const read = this.parkRead(leftMs, maxSize - entries.length, false, true);
      // Redis ends a BLOCK at its next timer tick (up to 100 ms late at hz 10): the deadline is kept here.
      const more = await within<StreamEntry[] | undefined>(read, deadline - performance.now(), undefined);
      if (more === undefined) {
        // Still parked: what it brings is the next call's, taken by the next park (never re-sent meanwhile).
        this.ahead.keep(read);
        break;
      }
      if (more.length === 0) break;
      entries = entries.concat(more);
    }
    return entries;
  }

  /**
   * blockMs, or less when a scheduled retry falls due sooner (Redis may end a BLOCK up to 100 ms
   * late: the due timer wakes it on time); 0 (no BLOCK) between a reclaim sweep's rounds.
   */
  private blockMs(): number {
    if (this.sweep.busy) return 0;
    const { blockMs } = this.d;
    const untilDue = this.d.custody.msUntilDue();
    // At least 5 ms: a due entry the beat could not claim yet (its idle short of the threshold) must not spin the loop.
    return untilDue < blockMs ? Math.max(5, Math.ceil(untilDue)) : blockMs;
  }

  /** At `maxWaitingRetries`, logged once each time it is reached. */
  private tooManyWaiting(): boolean {
    const { custody, maxWaitingRetries: max, logger } = this.d;
    const over = custody.waiting >= max;
    if (over && !this.overCap)
      logger.warn(
        `${custody.waiting} failed entries wait for their retry here (maxWaitingRetries ${max}): no new entries are read until some are retried`,
      );
    this.overCap = over;
    return over;
  }

  /** One XREADGROUP … BLOCK … > on the blocking lane (`blockMs` 0: no BLOCK); what it returns is leased at once. */
  private async parkRead(blockMs: number, count = this.d.count, ahead = false, filling = false): Promise<StreamEntry[]> {
    const { d } = this;
    const { stop, lanes } = d;
    // Connected: no promise to wait on. Not within a beat: the park fails (below).
    if (!lanes.readyToPark()) {
      const waitMs = blockMs || d.blockMs;
      const since = performance.now();
      if (!(await lanes.prepareBlocking(waitMs, stop.stopped$))) {
        if (stop.stopped) return [];
        // A park that cannot be sent within its beat is a failed call of the loop, like a refused XAUTOCLAIM: told
        // (the `error` event, health) and tried again after the backoff. Where the read claims (no XAUTOCLAIM each
        // beat), an empty park here let a worker locked out by a rotated password beat on with no error event.
        // A lane found closed answers at once: the rest of the beat passes first, or the restarts would spin.
        const leftMs = waitMs - (performance.now() - since);
        if (leftMs > 0) await firstValueFrom(race(timer(leftMs), stop.stopped$));
        if (stop.stopped) return [];
        throw new ParkLostError(`the blocking connection was not ready within ${waitMs} ms`);
      }
    }
    if (stop.stopped) return [];
    const { entries, inHand } = await this.gatedRead({
      streams: d.streams,
      count,
      blockMs,
      ahead,
      filling,
      beatMs: d.blockMs,
      wake$: this.wake$,
    });
    if (inHand) this.takenPastGate = true;
    return entries;
  }

  /**
   * The read behind the gates, one XREADGROUP (`blockMs` 0: no BLOCK) on the blocking lane; what it returns is
   * leased at once. A park (BLOCK) is not sent once stopping.
   */
  private async read({ streams, blockMs, count, claimMinIdleMs, kept }: ReadAsk): Promise<ReadResult> {
    const { d } = this;
    if (blockMs > 0 && d.stop.stopped) return { entries: [] };
    const { lanes } = d;
    // Redis delivers no earlier (a park's entries may come at any time of its BLOCK): see Lease.hold.
    const sentAt = performance.now();
    const read = d.fetch.readGroup(
      lanes.blocking,
      d.consumer,
      streams,
      streams.length === 1 ? NEW_ENTRIES : streams.map(() => '>'),
      count,
      blockMs > 0 ? blockMs : undefined,
      claimMinIdleMs,
    );
    this.parked = read;
    try {
      // Redis' answer, however late the event loop gets to it (a busy handler): never dropped.
      const fetched = await lanes.awaitPark(read, blockMs);
      const entries = kept ? kept(fetched) : fetched;
      // Held from arrival: a read-ahead batch may wait longer than minIdleMs for its turn.
      d.custody.received(entries, sentAt);
      // A batch handler's wait for more counts from here (a read-ahead may be taken much later).
      if (d.batch && entries.length > 0) this.arrivals.set(entries, performance.now());
      return { entries };
    } finally {
      if (this.parked === read) this.parked = undefined;
    }
  }

  private readAhead(): void {
    // A park still out (see fill) is the next one already.
    // Sent as a read ahead: a gate that grants what it reads never parks with it (see ReadAsk.ahead).
    if (!this.ahead.out) this.ahead.keep(this.parkRead(this.blockMs(), this.d.count, true));
  }
}
