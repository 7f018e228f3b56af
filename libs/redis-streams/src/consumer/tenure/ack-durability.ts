import { describeDurability, type ResolvedDurableAcks } from '../../options/durability-options.js';
import type { Logger } from '../../ports.js';
import { escapeControl } from '../../escape-control.js';
import { confirms, type Confirmation } from '../../redis/produce/replication-wait.js';

/**
 * Where an ordered partition's durable acks stand: `confirmed` (the replicas confirmed the last
 * wait), `held` (they did not, and the owner starts nothing until they do), `degraded` (they did not,
 * and the owner carries on without waiting), `pending` (no wait answered yet since it took the partition).
 */
export type DurabilityState = 'pending' | 'confirmed' | 'held' | 'degraded';

/** What health, inspect and the dashboard show of a partition's durable acks. */
export interface DurabilityView {
  wanted: ResolvedDurableAcks;
  state: DurabilityState;
  /** Unix ms since when it is in this state. */
  since: number;
  /** What the last wait confirmed; undefined before the first. */
  last: Confirmation | undefined;
}

/**
 * One ordered partition's durable acks (RedisStreamsServerOptions.durableAcks): every wait that
 * answers (after a beat, an ack, a dead-letter move) says whether the replicas keep up, and this
 * decides what the owner may do: start entries (`mayStart`), wait on its acks (`waitsOnAcks`).
 * A change of state is logged once and told to `onChange` (the lanes look again).
 */
export class AckDurability {
  private state: DurabilityState = 'pending';
  private since = Date.now();
  private last: Confirmation | undefined;

  constructor(
    readonly wanted: ResolvedDurableAcks,
    private readonly d: { stream: string; logger: Logger; onChange: () => void },
  ) {}

  /** A handling may start: the last wait was confirmed, or the owner carries on whatever the replicas do. */
  mayStart(): boolean {
    return this.wanted.whenUnconfirmed === 'carry-on' || this.state === 'confirmed';
  }

  /** Acks wait for the replicas, except while carrying on degraded (the beats find out when they are back). */
  waitsOnAcks(): boolean {
    return this.state !== 'degraded';
  }

  /** A wait answered: true when what it covers may count as settled (confirmed, or carrying on). */
  record(confirmed: Confirmation): boolean {
    this.last = confirmed;
    if (confirms(this.wanted, confirmed)) {
      this.enter('confirmed', confirmed);
      return true;
    }
    this.enter(this.wanted.whenUnconfirmed === 'hold' ? 'held' : 'degraded', confirmed);
    return this.wanted.whenUnconfirmed === 'carry-on';
  }

  /** The partition changed hands: the next owner's first wait decides again. */
  reset(): void {
    if (this.state === 'pending') return;
    this.state = 'pending';
    this.since = Date.now();
  }

  view(): DurabilityView {
    return { wanted: this.wanted, state: this.state, since: this.since, last: this.last };
  }

  /** What the owner keeps beside its owner key (durabilityKey) for inspect and the dashboard: JSON, parsed by parseDurabilityState. */
  stateText(): string {
    const { replicas, fsync, timeoutMs, whenUnconfirmed } = this.wanted;
    return JSON.stringify({
      state: this.state,
      since: this.since,
      confirmed: this.last?.replicas ?? null,
      replicas,
      fsync,
      timeoutMs,
      whenUnconfirmed,
      ...(this.last?.refused ? { refused: this.last.refused.slice(0, 200) } : {}),
    });
  }

  private enter(state: DurabilityState, confirmed: Confirmation): void {
    if (state === this.state) return;
    const was = this.state;
    this.state = state;
    this.since = Date.now();
    const { stream, logger } = this.d;
    const wanted = describeDurability(this.wanted);
    const got = confirmed.refused
      ? `the wait was refused (${escapeControl(confirmed.refused)})`
      : `${confirmed.replicas} confirmed within ${this.wanted.timeoutMs} ms`;
    if (state === 'held')
      logger.warn(
        `ordered "${stream}": acks not confirmed on ${wanted} (${got}): the partition is held, nothing starts until the replicas confirm (durableAcks.whenUnconfirmed 'hold')`,
      );
    else if (state === 'degraded')
      logger.warn(
        `ordered "${stream}": acks not confirmed on ${wanted} (${got}): carrying on without waiting, DEGRADED: a master lost now can run entries again after later ones of their key (durableAcks.whenUnconfirmed 'carry-on')`,
      );
    else if (was === 'held' || was === 'degraded')
      logger.log(
        `ordered "${stream}": acks confirmed on ${wanted} again: ${was === 'held' ? 'the partition runs again' : 'durable again'}`,
      );
    this.d.onChange();
  }
}
