import { defer, EMPTY, from, type Observable } from 'rxjs';
import type { ClaimRequest } from '../../redis/read/fetch-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { SettleFetched } from '../settle/batch-settler.js';
import type { Custody } from '../custody/custody.js';
import { withDeliveryCounts, withoutWaiting, type ArrivalDeps } from './fetched-entries.js';
import type { StepResult } from '../watch/loop-vitals.js';
import type { ServerOffer } from './server-offer.js';
import type { StopSignal } from '../stop-signal.js';
import type { PauseWatch } from '../intake/pause-watch.js';
import { RetryOrphans } from './retry-orphans.js';

/** What the reclaim step claims with, holds and hands its entries to. */
export interface ReclaimerDeps extends ArrivalDeps {
  stop: StopSignal;
  streams: readonly string[];
  /** COUNT of each round (all its streams together). */
  count: number;
  /** A sweep starts at most once per blockMs. */
  blockMs: number;
  /** How long past its due time a retry left with nobody is taken back (see RetryOrphans). */
  leaseRenewMs: number;
  custody: ArrivalDeps['custody'] & Pick<Custody, 'anyDue' | 'claimDue' | 'received' | 'heldOn' | 'flushLeft'>;
  settle: SettleFetched;
  /** Whether the park's read claims idle entries itself (XREADGROUP … CLAIM): sweeps are then rarer. */
  offer: Pick<ServerOffer, 'claimsOnRead'>;
  /** Paused streams are not swept: their idle entries wait for the resume. */
  pause: Pick<PauseWatch, 'readable' | 'has'>;
}

/** Without a claim, XAUTOCLAIM calls per stream per sweep (each scans ~10 × COUNT PEL entries). */
const MAX_EMPTY_SCANS_PER_SWEEP = 4;

/**
 * Streams one round reclaims at most: Redis spends ~3.5 µs per stream on a round (one script),
 * the worker about as much building and reading it, and no park is out meanwhile. A larger set
 * is swept over several rounds, a park between each: an entry waits one short round, never N.
 */
const MAX_STREAMS_PER_ROUND = 200;

/**
 * Step 2 of a beat: the retries of this consumer's own failed entries that are due, and
 * XAUTOCLAIM of entries idle past `minIdleMs`. A sweep of every stream starts at most once per
 * blockMs; each beat takes one round of it (one round trip for up to MAX_STREAMS_PER_ROUND
 * streams, one batch at most in all), and the park runs between rounds without blocking:
 * however large a dead peer's PEL or the stream set, new entries wait one round, not the sweep.
 */
export class Reclaimer {
  /** Each stream's XAUTOCLAIM cursor, carried across rounds and sweeps. */
  private readonly cursors = new Map<string, string>();
  /** Streams of the sweep under way with more to take (claimed last round, or a cursor to carry): empty scans so far. */
  private readonly sweeping = new Map<string, number>();
  private lastSweepAt = 0;
  /** Retries left with nobody, looked for once per minIdleMs (see RetryOrphans). */
  private readonly orphans: RetryOrphans;
  private lastOrphansAt = 0;

  /** Emits what was claimed and settled; nothing when nothing was due (under load: no promise per batch). */
  readonly step$: Observable<StepResult> = defer(() => {
    if (this.d.custody.anyDue() && !this.d.stop.stopped) return from(this.retryThenReclaim());
    return this.roundDue() ? from(this.round().then((fetched): StepResult => ({ step: 'reclaim', fetched }))) : EMPTY;
  });

  constructor(private readonly d: ReclaimerDeps) {
    this.orphans = new RetryOrphans({ retries: d.commands.retries, consumer: d.consumer, graceMs: d.leaseRenewMs, logger: d.logger });
  }

  /** Whether `step$` has anything to do now (it decides again when subscribed): under load, nothing. */
  get due(): boolean {
    return (this.d.custody.anyDue() && !this.d.stop.stopped) || this.sweeping.size > 0 || this.sweepDue();
  }

  /** A sweep is under way: the park between its rounds must not block (see Parker). */
  get busy(): boolean {
    return this.sweeping.size > 0 && !this.d.stop.stopped;
  }

  private async retryThenReclaim(): Promise<StepResult> {
    const retried = await this.retryOwed();
    const reclaimed = this.roundDue() ? await this.round() : 0;
    return { step: 'reclaim', fetched: retried + reclaimed };
  }

  /**
   * An idle beat lasts blockMs; a busy one (the park returned entries at once) can be far
   * shorter, and a sweep per batch would cost a round trip each: under load, a sweep starts
   * at most once per blockMs. Recovery still happens within minIdleMs + blockMs.
   */
  private sweepDue(): boolean {
    return Date.now() - this.lastSweepAt >= this.sweepEveryMs();
  }

  /**
   * Where the park's read claims idle entries (XREADGROUP … CLAIM), a sweep is left only what the
   * read cannot do: report entries deleted while pending (it skips them; XAUTOCLAIM drops and names
   * them) and take work while the park reads nothing (maxWaitingRetries reached). Once per
   * minIdleMs is enough for that: an entry is not idle sooner.
   */
  private sweepEveryMs(): number {
    const { d } = this;
    const readClaims = d.offer.claimsOnRead(d.streams.length) && d.custody.waiting < d.maxWaitingRetries;
    return readClaims ? Math.max(d.blockMs, d.minIdleMs) : d.blockMs;
  }

  /** A round is due when a sweep is under way, or one may start (then it does). */
  private roundDue(): boolean {
    if (this.d.stop.stopped) return false;
    if (this.sweeping.size > 0) return true;
    if (!this.sweepDue()) return false;
    this.lastSweepAt = Date.now();
    for (const stream of this.d.pause.readable()) this.sweeping.set(stream, 0);
    return true;
  }

  /** Failed entries of this consumer due for their retry, claimed back and settled. */
  private async retryOwed(): Promise<number> {
    const entries = await this.d.custody.claimDue();
    await this.d.settle(entries, 'reclaim');
    return entries.length;
  }

  /**
   * Once per minIdleMs (as a dead peer's entries come back once idle that long), before a round:
   * retries left with nobody, taken back and settled.
   */
  private async retakeOrphans(): Promise<number> {
    const { d } = this;
    if (Date.now() - this.lastOrphansAt < d.minIdleMs) return 0;
    this.lastOrphansAt = Date.now();
    const sentAt = performance.now();
    const taken = await this.orphans.retake(d.pause.readable());
    // Held here already (fetched, not settled: a batch of ours settles it): not settled twice.
    const fresh = taken.filter((e) => !d.custody.heldOn(e.stream).has(e.id));
    if (fresh.length === 0) return 0;
    d.custody.received(fresh, sentAt);
    await d.settle(fresh, 'reclaim');
    return fresh.length;
  }

  /** One XAUTOCLAIM per stream of the sweep, one round trip; what they claimed, settled as one batch. */
  private async round(): Promise<number> {
    const retaken = await this.retakeOrphans();
    return retaken + (await this.claimRound());
  }

  private async claimRound(): Promise<number> {
    const { d } = this;
    const streams: string[] = [];
    for (const stream of this.sweeping.keys()) {
      // Paused since the sweep began: its peers' idle entries wait for the resume.
      if (d.pause.has(stream)) this.sweeping.delete(stream);
      else if (streams.push(stream) >= MAX_STREAMS_PER_ROUND) break;
    }
    if (streams.length === 0) return 0;
    const requests: ClaimRequest[] = streams.map((stream) => ({ stream, cursor: this.cursors.get(stream) ?? '0-0' }));
    // One batch per round at most, whatever the number of streams: the park comes next.
    const sentAt = performance.now();
    const { results, retriesWaiting, failure } = await d.commands.fetch.autoClaim(d.consumer, d.minIdleMs, requests, d.count);
    const claimed: StreamEntry[] = [];
    results.forEach((result, i) => {
      // Not reached (the round's batch was full): next round, from the same cursor.
      if (!result) return;
      const stream = streams[i]!;
      this.cursors.set(stream, result.cursor);
      if (result.deletedIds.length > 0) d.custody.deleted(stream, result.deletedIds);
      // Ours already, fetched and waiting (a read-ahead whose lease lapsed while the event loop
      // was held): the batch that holds them settles them; settling them here too would run them twice.
      const held = result.entries.length > 0 ? d.custody.heldOn(stream) : undefined;
      const claimedNow = result.entries.filter((e) => !held!.has(e.id));
      claimed.push(...claimedNow);
      // Deleted ids count as progress: a trimmed PEL is cleared round after round, not four calls per sweep.
      this.carry(stream, result.cursor, claimedNow.length > 0 || result.deletedIds.length > 0);
    });
    if (claimed.length > 0) await this.settleClaimed(claimed, retriesWaiting, sentAt);
    // Streams out of the sweep have shown every entry they leave: their line names them all.
    d.custody.flushLeft((stream) => !this.sweeping.has(stream));
    // A stream failed (NOGROUP) after the others claimed: those are settled first, then the loop restarts.
    if (failure) throw failure;
    return claimed.length;
  }

  private async settleClaimed(claimed: StreamEntry[], retriesWaiting: boolean, sentAt: number): Promise<void> {
    const { d } = this;
    d.custody.received(claimed, sentAt);
    await d.commands.fetch.countClaimed(d.consumer, claimed, (stream) => d.custody.heldOn(stream).size + d.custody.waiting);
    await d.settle(await withoutWaiting(d, await withDeliveryCounts(d, claimed, true), retriesWaiting), 'reclaim');
  }

  /**
   * A stream stays in the sweep while its cursor carries and it claims, or has had fewer than
   * MAX_EMPTY_SCANS_PER_SWEEP empty scans; it goes to the back, so one stream's large PEL does
   * not hold the others' rounds (each round starts with the streams not yet reached).
   */
  private carry(stream: string, cursor: string, claimedSome: boolean): void {
    const emptyScans = (this.sweeping.get(stream) ?? 0) + (claimedSome ? 0 : 1);
    this.sweeping.delete(stream);
    if (cursor !== '0-0' && emptyScans < MAX_EMPTY_SCANS_PER_SWEEP) this.sweeping.set(stream, emptyScans);
  }
}
