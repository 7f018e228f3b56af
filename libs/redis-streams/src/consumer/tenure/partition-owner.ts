import { defer, EMPTY, exhaustMap, interval, type Observable } from 'rxjs';
import { randomUUID } from 'node:crypto';
import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';
import type { ResolvedDurableAcks } from '../../options/durability-options.js';
import type { OwnershipCommands } from '../../redis/tenure/ownership-commands.js';
import { parseOwnerValue, type OwnershipBeat } from '../../redis/replies/replies.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { DurableOwnershipCommands } from '../../redis/tenure/durable-ownership-commands.js';
import type { AckDurability } from './ack-durability.js';
import type { Confirmation } from '../../redis/produce/replication-wait.js';

/** An ordered pattern's partition, as its reader sees it. */
export interface OrderedStream {
  pattern: string;
  /** Its index (0 for an unpartitioned stream), and how many the pattern has: what the share-out reads. */
  partition: number;
  partitions: number;
  /** Its durable acks (see RedisStreamsServerOptions.durableAcks); undefined: none. */
  durableAcks?: ResolvedDurableAcks | undefined;
}

export interface PartitionOwnerDeps {
  ownership: Pick<OwnershipCommands, 'beat' | 'release' | 'takeOver' | 'giveBack'>;
  stream: string;
  ordered: OrderedStream;
  consumer: string;
  /** How long a beat holds the ownership and the membership (minIdleMs): a dead owner's partition is free after it. */
  ttlMs: number;
  /** How often the owner renews (leaseRenewMs), and a standby asks. */
  beatMs: number;
  logger: Logger;
  /** Ownership changed (lost, or asked to release): the loop ends its owned phase at the next settle point. */
  onChange: () => void;
  /** Durable acks: the beats go on their connection, each waited for (see DurableOwnershipCommands), and say how it went. */
  durable?: { commands: Pick<DurableOwnershipCommands, 'beat'>; durability: AckDurability } | undefined;
  /**
   * The owned loop's liveness: how long it has gone without progress (a step of the loop answered, or
   * an entry settled), 0 while it waits on something of its own choosing (handlers running, a hold).
   * Past `stallMs` the lease is no longer renewed: a stuck owner gives the partition up.
   */
  stalledForMs?: () => number;
  stallMs?: number;
}

/** What health and inspect show of a partition's ownership. */
export interface OwnershipView {
  stream: string;
  pattern: string;
  partition: number;
  /** This consumer owns it now. */
  owned: boolean;
  /** The owner's epoch (a fencing token); 0 when this consumer does not own it. */
  epoch: number;
  /** The owner as the last beat saw it: `<epoch> <token> <consumer>`, '' when free. */
  owner: string;
  /** Live members of the group on this partition at the last beat. */
  members: number;
}

/**
 * One ordered partition's ownership, for this consumer: a lease on the partition's owner key
 * (`<epoch> <token> <consumer>`, expiring after ttl on Redis' clock), renewed every beat, shared out among
 * the group's live members (OWNERSHIP_SCRIPT). The epoch fences: acks name it, and a stale owner's
 * are refused. The owner also fences itself: past ttl since the start of its last good renewal it
 * starts nothing (`valid`), so a peer that takes the partition after ttl meets no handler of its.
 */
export class PartitionOwner {
  /** This process' own mark in the owner value: another process under the same consumer name is another owner. */
  private readonly token = randomUUID().slice(0, 8);
  private epoch = 0;
  /** The owner value held (`<epoch> <token> <consumer>`), '' when none: what acks and the release are fenced with. */
  private held = '';
  /** The owner key named this consumer under another process' token at the last beat (logged once each time). */
  private namesakeTold = false;
  /** performance.now() after which this owner starts nothing more (its last renewal's start + ttl, less a margin). */
  private validUntil = 0;
  private releaseAsked = false;
  private last: OwnershipBeat | undefined;
  /** Renewals failed in a row (the first is logged, the rest counted: one line per change of state). */
  private failedRenewals = 0;
  /** The lease is not renewed because the loop stalled (logged once). */
  private stalledTold = false;
  /** Counts every change of the owner value held: a beat's answer is applied only if nothing changed it meanwhile. */
  private generation = 0;

  constructor(private readonly d: PartitionOwnerDeps) {}

  get owned(): boolean {
    return this.epoch > 0;
  }

  /** The owner value held: the fence acks carry. */
  get fence(): string {
    return this.held;
  }

  /** Owned, not asked to release, and within its lease by this process' clock: a handling may start. */
  valid(): boolean {
    return this.epoch > 0 && !this.releaseAsked && performance.now() < this.validUntil;
  }

  /** Owned and within its lease by this process' clock, asked to release or not: its commands on the partition are still its own. */
  holds(): boolean {
    return this.epoch > 0 && performance.now() < this.validUntil;
  }

  /** The owned phase should end: lost, asked to release, or the lease ran out here. */
  get ending(): boolean {
    return !this.valid();
  }

  /** One beat: join or renew; true when this consumer owns the partition after it. */
  async beat(): Promise<boolean> {
    const { d } = this;
    const startedAt = performance.now();
    const generation = this.generation;
    let beat: OwnershipBeat;
    let confirmed: Confirmation | undefined;
    if (d.durable) {
      const { durability } = d.durable;
      const answer = await d.durable.commands.beat(
        d.stream,
        d.consumer,
        this.held,
        d.ttlMs,
        d.ordered.partition,
        this.token,
        durability.stateText(),
        durability.wanted,
      );
      beat = answer.beat;
      confirmed = answer.confirmed;
    } else beat = await d.ownership.beat(d.stream, d.consumer, this.held, d.ttlMs, d.ordered.partition, this.token);
    // Another beat or a release changed what this process holds while this one was out (a renewal slowed by a
    // failover, answered after the next owned phase began): its answer is about a value no longer held.
    if (generation !== this.generation) return this.epoch > 0;
    if (d.durable && beat.state !== 'standby') {
      // Owned (taken or kept): whether the replicas have it decides whether handlings may start; a new
      // epoch (taken now) starts from what this first wait says.
      if (beat.epoch !== this.epoch) d.durable.durability.reset();
      if (confirmed) d.durable.durability.record(confirmed);
    }
    this.last = beat;
    const was = this.epoch;
    if (beat.state === 'standby') {
      // This very process' value (its token): a renewal answered late took the partition again after a release.
      // Held as the value to renew, the next beat takes it back instead of waiting for its lease to run out.
      const mine = this.isOwnValue(beat.owner) ? beat.owner : '';
      if (this.held !== mine) this.generation++;
      this.epoch = 0;
      this.held = mine;
      if (!mine) this.tellNamesake(beat.owner);
      if (was > 0) {
        d.logger.warn(
          `lost ownership of "${d.stream}" (epoch ${was}) to ${beat.owner ? `"${escapeControl(beat.owner)}"` : 'nobody'}: its handlings stop at the next settle point`,
        );
        d.onChange();
      }
      return false;
    }
    if (this.held !== beat.owner) this.generation++;
    this.epoch = beat.epoch;
    this.held = beat.owner;
    this.namesakeTold = false;
    // A margin of a tenth: this process' clock and Redis' may run apart a little over one ttl.
    this.validUntil = startedAt + d.ttlMs * 0.9;
    const asked = beat.state === 'release' && !this.releaseAsked;
    this.releaseAsked = beat.state === 'release';
    // Told once the state is set: what it wakes reads valid().
    if (asked) d.onChange();
    if (was !== beat.epoch)
      d.logger.log(`owns "${d.stream}" (epoch ${beat.epoch}, ${beat.members} member(s) of the group share the partitions)`);
    return true;
  }

  /** An owner value this process set (its token and consumer name). */
  private isOwnValue(owner: string): boolean {
    const value = parseOwnerValue(owner);
    return value !== undefined && value.token === this.token && value.consumer === this.d.consumer;
  }

  /**
   * The owner key names this consumer but another process: this one restarted (it waits for the old
   * lease to run out), or two live processes were given one name (the second stands by for good).
   */
  private tellNamesake(owner: string): void {
    if (parseOwnerValue(owner)?.consumer !== this.d.consumer) {
      this.namesakeTold = false;
      return;
    }
    if (this.namesakeTold) return;
    this.namesakeTold = true;
    this.d.logger.warn(
      `"${this.d.stream}" is held by another process under this consumer's name (${escapeControl(owner)}): a restart takes it once that lease runs out (minIdleMs); two live processes must not share a consumer name`,
    );
  }

  /** While owned: a renewal every beat (emitted once done); a failed one is logged, and the lease runs out here unless the next succeeds. */
  readonly renewals$: Observable<void> = defer(() => interval(this.d.beatMs)).pipe(
    exhaustMap(() => (this.epoch > 0 ? this.renew() : EMPTY)),
  );

  private async renew(): Promise<void> {
    const { d } = this;
    const stalled = d.stalledForMs?.() ?? 0;
    if (d.stallMs !== undefined && stalled > d.stallMs) {
      // A loop stuck past every bound of its steps: the lease runs out, and a live member takes the partition.
      if (!this.stalledTold) {
        this.stalledTold = true;
        d.logger.warn(
          `ordered "${d.stream}" (epoch ${this.epoch}): its loop made no progress for ${Math.round(stalled)} ms (more than ${d.stallMs}): the lease is not renewed, another member takes the partition within minIdleMs (${d.ttlMs} ms)`,
        );
      }
      this.validUntil = 0;
      d.onChange();
      return;
    }
    this.stalledTold = false;
    const epoch = this.epoch;
    try {
      const owned = await this.beat();
      // Lost meanwhile: the beat said so, and there is nothing renewed to tell.
      if (this.failedRenewals > 0 && owned)
        d.logger.log(`renewed ownership of "${d.stream}" (epoch ${this.epoch}) again after ${this.failedRenewals} failed renewal(s)`);
      this.failedRenewals = 0;
    } catch (err) {
      // The first failure of a run is told; the next ones until a renewal succeeds, or the lease runs out here, are not.
      if (this.failedRenewals++ === 0)
        d.logger.warn(
          `could not renew ownership of "${d.stream}" (epoch ${epoch}): ${describeError(err)}; trying every ${d.beatMs} ms, its handlings stop once the lease runs out here`,
        );
      if (!this.valid()) d.onChange();
    }
  }

  /** The previous owner's pending entries become this consumer's (see OwnershipCommands.takeOver). */
  takeOver(): Promise<number> {
    return this.d.ownership.takeOver(this.d.stream, this.d.consumer);
  }

  /** Entries read here and never started, before a release: their delivery counts put back (see OwnershipCommands.giveBack). */
  giveBack(entries: readonly StreamEntry[]): Promise<void> {
    return this.d.ownership.giveBack(this.d.stream, this.d.consumer, entries);
  }

  /** Gives the partition up once nothing of it is in hand here; `leaving` (a stop): the membership ends too. */
  async release(leaving: boolean): Promise<void> {
    const epoch = this.epoch;
    const held = this.held;
    if (held !== '') this.generation++;
    this.epoch = 0;
    this.held = '';
    this.releaseAsked = false;
    if (epoch === 0 && !leaving) return;
    await this.d.ownership.release(this.d.stream, this.d.consumer, held, leaving);
    if (epoch > 0) this.d.logger.log(`released "${this.d.stream}" (epoch ${epoch})`);
  }

  view(): OwnershipView {
    const { d } = this;
    return {
      stream: d.stream,
      pattern: d.ordered.pattern,
      partition: d.ordered.partition,
      owned: this.epoch > 0,
      epoch: this.epoch,
      owner: this.last?.owner ?? '',
      members: this.last?.members ?? 0,
    };
  }
}
