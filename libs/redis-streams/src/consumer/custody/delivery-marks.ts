import { compareIds } from '../../redis/stream-ids.js';
import type { StreamEntry } from '../../stream-entry.js';
import { DueHeap, type DueItem } from './due-heap.js';
import { scheduledRetryAt } from '../settle/retry-schedule.js';
import type { SettledEvent } from '../settle/settled-event.js';

/** An entry this consumer failed and will retry, and when it was last seen pending under it. */
export interface Owed {
  count: number;
  /** performance.now() of the last sighting; its idle time then was at most `idleMs`. */
  confirmedAt: number;
  idleMs: number;
  /** performance.now() of its scheduled retry (a retry policy's, a RetryLaterException's); undefined: once idle (see PendingAudit). */
  retryAt?: number | undefined;
}

/** Owed entries without a scheduled retry remembered per stream; past this, new ones are not tracked (and counted). Scheduled ones are bounded by maxWaitingRetries instead. */
const MAX_OWED_TRACKED = 10_000;

/**
 * What this consumer knows of its place in each stream, so that a lost group (XGROUP DESTROY,
 * a server that lost its data) is re-created where it left off rather than at `groupStartId`
 * (which would run every settled entry again): the highest id delivered to it, and the entries
 * it still owes (failed here, or taken back by a recovery, and not seen settled since) with
 * their delivery counts, since their pending state goes with the group. Entries in hand are
 * the lease's.
 */
export class DeliveryMarks {
  private readonly highest = new Map<string, string>();
  /** By stream: id → what is known of it. */
  private readonly owing = new Map<string, Map<string, Owed>>();
  private readonly untracked = new Map<string, number>();
  /** Owed entries with a scheduled retry, over every stream. */
  private waitingCount = 0;
  /** The scheduled retries by due time (stale items skipped when met: see DueHeap). */
  private readonly dueHeap = new DueHeap();

  delivered(entries: readonly StreamEntry[]): void {
    // Redis returns each stream's entries in id order: only the last of a run can be a new high.
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (entries[i + 1]?.stream === e.stream) continue;
      const top = this.highest.get(e.stream);
      if (top === undefined || compareIds(e.id, top) > 0) this.highest.set(e.stream, e.id);
    }
  }

  /**
   * `confirmedAt`: when the entry was last known pending under this consumer with idle 0
   * (performance.now(); now when not given). `owed` false: a failure not to retry (see settleInDoubt). Returns when a
   * failure's scheduled retry is due (performance.now()).
   */
  settled(event: SettledEvent, confirmedAt?: number, owed = true): number | undefined {
    if (event.outcome !== 'failed' || !owed) {
      // The common case, once per entry: nothing owed, nothing to look up (and no clock read).
      if (this.owing.size > 0) this.forgetOwed(event.stream, event.id);
      return undefined;
    }
    confirmedAt ??= performance.now();
    const retryAt = scheduledRetryAt(event);
    const ids = this.owing.get(event.stream);
    if (retryAt === undefined && ids && ids.size >= MAX_OWED_TRACKED && !ids.has(event.id)) {
      this.untracked.set(event.stream, (this.untracked.get(event.stream) ?? 0) + 1);
      return undefined;
    }
    this.owe(event.stream, event.id, { count: event.deliveryCount, confirmedAt, idleMs: 0, retryAt });
    return retryAt;
  }

  /** Taken over from a consumer that stopped or died while it waited for its retry (see ADOPT_RETRY_SCRIPT): owed, due in `retryInMs`. */
  adopt(stream: string, id: string, count: number, retryInMs: number): number {
    const now = performance.now();
    const retryAt = now + retryInMs;
    this.owe(stream, id, { count, confirmedAt: now, idleMs: 0, retryAt });
    return retryAt;
  }

  /**
   * Found pending under this consumer though it never fetched it (an operator's XCLAIM gave it to
   * it), idle `idleMs` as of `at`: owed from now, claimed for its try once idle (see PendingAudit).
   * False when past what the marks track (not taken).
   */
  takeIn(stream: string, id: string, count: number, at: number, idleMs: number): boolean {
    const ids = this.owing.get(stream);
    if (ids && ids.size >= MAX_OWED_TRACKED) return false;
    this.owe(stream, id, { count, confirmedAt: at, idleMs });
    return true;
  }

  /** How many entries of `stream` are owed here. */
  owedOn(stream: string): number {
    return this.owing.get(stream)?.size ?? 0;
  }

  /** Owed entries waiting for a scheduled retry. */
  get waiting(): number {
    return this.waitingCount;
  }

  /** Owed entries without a scheduled retry (they come back once idle): none is the common case with a policy. */
  get unscheduled(): number {
    let owed = 0;
    for (const ids of this.owing.values()) owed += ids.size;
    return owed - this.waitingCount;
  }

  /** The owed entries by stream, as they are (no copy: for scans of many waiting entries; do not change them meanwhile). */
  owedMaps(): IterableIterator<[stream: string, owed: ReadonlyMap<string, Owed>]> {
    return this.owing.entries();
  }

  private owe(stream: string, id: string, owed: Owed): void {
    let ids = this.owing.get(stream);
    if (!ids) this.owing.set(stream, (ids = new Map()));
    const before = ids.get(id);
    if (before?.retryAt !== undefined) this.waitingCount--;
    if (owed.retryAt !== undefined) {
      this.waitingCount++;
      if (before?.retryAt !== owed.retryAt) this.dueHeap.push({ at: owed.retryAt, stream, id });
    }
    ids.set(id, owed);
  }

  /** The scheduled retries due by `now`, by stream, each once (taken off the schedule; the audit claims them). */
  takeDueRetries(now: number): Map<string, [id: string, owed: Owed][]> {
    const due = new Map<string, [string, Owed][]>();
    for (let top = this.dueHeap.peek(); top !== undefined && top.at <= now; top = this.dueHeap.peek()) {
      this.dueHeap.pop();
      const owed = this.owing.get(top.stream)?.get(top.id);
      // Stale: settled, forgotten or rescheduled since it was pushed.
      if (owed?.retryAt !== top.at) continue;
      const list = due.get(top.stream);
      if (list) list.push([top.id, owed]);
      else due.set(top.stream, [[top.id, owed]]);
    }
    return due;
  }

  /** When the first scheduled retry is due (performance.now()); Infinity when none waits. */
  nextRetryAt(): number {
    for (let top = this.dueHeap.peek(); top !== undefined; top = this.dueHeap.peek()) {
      if (this.owing.get(top.stream)?.get(top.id)?.retryAt === top.at) return top.at;
      this.dueHeap.pop();
    }
    return Infinity;
  }

  /** Every waiting entry back on the schedule, stale items dropped (after a claim that did not happen: Redis failed it). */
  rescheduleAll(): void {
    const items: DueItem[] = [];
    for (const [stream, ids] of this.owing)
      for (const [id, o] of ids) if (o.retryAt !== undefined) items.push({ at: o.retryAt, stream, id });
    this.dueHeap.reset(items);
  }

  /** Streams with owed entries, and what is known of each (for the audit). */
  owedByStream(): [stream: string, owed: [id: string, owed: Owed][]][] {
    return [...this.owing].map(([stream, ids]) => [stream, [...ids]]);
  }

  /** Still owed: failed here and not settled since. */
  owes(stream: string, id: string): boolean {
    return this.owing.get(stream)?.has(id) ?? false;
  }

  /** Seen pending under this consumer, idle `idleMs`, by an audit sent at `at`. */
  confirm(stream: string, id: string, at: number, idleMs: number): void {
    const owed = this.owing.get(stream)?.get(id);
    if (owed) Object.assign(owed, { confirmedAt: at, idleMs });
  }

  /** No longer this consumer's to retry: a peer has it, it is gone, or it is being retried (in hand). */
  forgetOwed(stream: string, id: string): void {
    const ids = this.owing.get(stream);
    if (!ids) return;
    if (ids.get(id)?.retryAt !== undefined) this.waitingCount--;
    ids.delete(id);
    if (ids.size === 0) this.owing.delete(stream);
  }

  /** The highest id delivered to this consumer from `stream`, if any. */
  highestOf(stream: string): string | undefined {
    return this.highest.get(stream);
  }

  /** What it owes: failed here and not seen settled since, and `held` (fetched, not settled), with delivery counts. */
  owed(stream: string, held: readonly string[], reown: (o: Owed) => boolean): [id: string, deliveryCount: number, reown: boolean][] {
    const owing = this.owing.get(stream);
    const owed: [string, number, boolean][] = [...(owing ?? [])].map(([id, o]) => [id, o.count, reown(o)]);
    // Held (fetched, not settled or its ack unconfirmed): taken back only with a lost group.
    for (const id of held) if (!owing?.has(id)) owed.push([id, 1, false]);
    return owed;
  }

  /**
   * After a recovery: what it owes is exactly what is now pending under it among what it owed
   * (`owed`, with counts). The others were settled elsewhere or deleted. Entries it takes back
   * stay owed until settled, so a second loss before its self-drain reads them loses nothing.
   */
  keepOwned(stream: string, owed: readonly (readonly [id: string, count: number, ...rest: unknown[]])[], pending: readonly string[]): void {
    const mine = new Set(pending);
    const now = performance.now();
    const before = this.owing.get(stream);
    this.dropStream(stream);
    // A scheduled retry keeps its time: self-drain reads the entry again, and it waits until then.
    for (const [id, count] of owed)
      if (mine.has(id)) this.owe(stream, id, { count, confirmedAt: now, idleMs: 0, retryAt: before?.get(id)?.retryAt });
  }

  /** Failures that came past the limit since the last call (their retry depends on the group surviving). */
  takeUntracked(stream: string): number {
    const n = this.untracked.get(stream) ?? 0;
    this.untracked.delete(stream);
    return n;
  }

  /** The stream was deleted and written anew: nothing known of the old one applies. */
  forget(stream: string): void {
    this.highest.delete(stream);
    this.dropStream(stream);
    this.untracked.delete(stream);
  }

  private dropStream(stream: string): void {
    for (const o of this.owing.get(stream)?.values() ?? []) if (o.retryAt !== undefined) this.waitingCount--;
    this.owing.delete(stream);
  }
}
