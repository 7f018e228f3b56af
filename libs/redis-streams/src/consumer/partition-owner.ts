import { defer, EMPTY, exhaustMap, interval, type Observable } from 'rxjs';
import { randomUUID } from 'node:crypto';
import { describeError } from '../describe-error.js';
import { escapeControl } from '../escape-control.js';
import type { Logger } from '../ports.js';
import type { OwnershipCommands } from '../redis/ownership-commands.js';
import { parseOwnerValue, type OwnershipBeat } from '../redis/replies.js';
import type { StreamEntry } from '../stream-entry.js';

/** An ordered pattern's partition, as its reader sees it. */
export interface OrderedStream {
  pattern: string;
  /** Its index (0 for an unpartitioned stream), and how many the pattern has: what the share-out reads. */
  partition: number;
  partitions: number;
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
    const beat = await d.ownership.beat(d.stream, d.consumer, this.held, d.ttlMs, d.ordered.partition, this.token);
    this.last = beat;
    const was = this.epoch;
    if (beat.state === 'standby') {
      this.epoch = 0;
      this.held = '';
      this.tellNamesake(beat.owner);
      if (was > 0) {
        d.logger.warn(
          `lost ownership of "${d.stream}" (epoch ${was}) to ${beat.owner ? `"${escapeControl(beat.owner)}"` : 'nobody'}: its handlings stop at the next settle point`,
        );
        d.onChange();
      }
      return false;
    }
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
    await this.beat().catch((err: unknown) => {
      this.d.logger.warn(`could not renew ownership of "${this.d.stream}" (epoch ${this.epoch}): ${describeError(err)}`);
      if (!this.valid()) this.d.onChange();
    });
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
