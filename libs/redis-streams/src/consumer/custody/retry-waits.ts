import { BehaviorSubject, EMPTY, map, switchMap, timer, type Observable } from 'rxjs';
import type { StreamCommands } from '../../redis/stream-commands.js';
import type { DeliveryMarks, Owed } from './delivery-marks.js';
import type { Lease } from './lease.js';

/** What keeping and handing back the entries that wait for a retry reads (PendingAudit's deps hold these). */
export interface RetryWaitsDeps {
  commands: StreamCommands;
  lease: Lease;
  marks: DeliveryMarks;
  consumer: string;
  minIdleMs: number;
  leaseRenewMs: number;
}

/**
 * When the first owed entry is due (performance.now()); `due$` emits then (an idle loop is parked
 * for blockMs and must be woken). Part of the reader's upkeep: unsubscribing ends it.
 */
export class DueClock {
  private readonly at$ = new BehaviorSubject(Infinity);
  /** Emits when the first owed entry falls due (each new due time replaces the last one's timer). */
  readonly due$: Observable<void> = this.at$.pipe(
    switchMap((at) => (at === Infinity ? EMPTY : timer(Math.max(0, at - performance.now())))),
    map(() => undefined),
  );

  msUntil(): number {
    return this.at$.value - performance.now();
  }

  /** Due no later than `at`. */
  lower(at: number): void {
    if (at < this.at$.value) this.set(at);
  }

  set(at: number): void {
    this.at$.next(at);
  }

  /** Nothing known to be due (until the caller sets it again); no wake comes. */
  clear(): void {
    this.at$.next(Infinity);
  }
}

/** Ids per idle reset: each costs Redis an XPENDING, and the script holds every other client meanwhile. */
const TOUCHES_PER_CALL = 50;

/**
 * Idle time past which an entry waiting for a scheduled retry has its idle time reset: checks come
 * every leaseRenewMs / 2, so it stays below minIdleMs − leaseRenewMs / 2 (an event loop held longer
 * lets a peer take it, which keeps its schedule: see ADOPT_RETRY_SCRIPT). As late as that, so each
 * waiting entry costs one reset per `minIdleMs − leaseRenewMs`, not one per check.
 */
const touchIdleMs = (d: RetryWaitsDeps): number => Math.max(0, d.minIdleMs - d.leaseRenewMs);

/**
 * Entries waiting for a retry not yet due, idle `touchIdleMs` or more: idle reset (XCLAIM …
 * JUSTID, no delivery counted), so no peer's reclaim takes them early. Once due they are left
 * alone: a consumer that cannot claim them (every handler slot hung) leaves them to its peers.
 * Returns those no longer pending under this consumer, for the audit to explain.
 */
export async function touchWaiting(d: RetryWaitsDeps): Promise<Map<string, [string, Owed][]>> {
  const threshold = touchIdleMs(d);
  const missing = new Map<string, [string, Owed][]>();
  // Collected before any call: the owed maps change while the calls are out.
  const todo: [string, [string, Owed][]][] = [];
  const now = performance.now();
  for (const [stream, owed] of d.marks.owedMaps()) {
    const held = d.lease.idsOn(stream);
    const due: [string, Owed][] = [];
    for (const [id, o] of owed)
      if (o.retryAt !== undefined && o.retryAt > now && now - o.confirmedAt + o.idleMs >= threshold && !held.has(id)) due.push([id, o]);
    if (due.length > 0) todo.push([stream, due]);
  }
  for (const [stream, due] of todo) {
    const owned = new Set<string>();
    // 50 per call, one call at a time: 10,000 at once would hold Redis (and every park and ack) for tens of ms.
    for (let i = 0; i < due.length; i += TOUCHES_PER_CALL) {
      const ids = due.slice(i, i + TOUCHES_PER_CALL).map(([id]) => id);
      for (const id of await d.commands.setIdle(stream, d.consumer, ids, 0)) owned.add(id);
      // Paced: the handlers and parks of this process and its peers get their turns in between.
      if (i + TOUCHES_PER_CALL < due.length) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    for (const [id] of due) if (owned.has(id)) d.marks.confirm(stream, id, now, 0);
    const gone = due.filter(([id]) => !owned.has(id));
    if (gone.length > 0) missing.set(stream, gone);
  }
  return missing;
}

/**
 * At a graceful stop: entries waiting for a retry are given the idle time that makes them a
 * peer's (XAUTOCLAIM past minIdleMs) at their due time; one due later than minIdleMs from now
 * is a peer's after minIdleMs, which sees it waits and keeps it waiting (ADOPT_RETRY_SCRIPT).
 * Their records stay in the retry set, so a restart under the same name keeps them waiting too.
 */
export async function handBackWaiting(d: RetryWaitsDeps): Promise<void> {
  for (const [stream, owed] of d.marks.owedByStream()) {
    const now = performance.now();
    const byIdle = new Map<number, string[]>();
    for (const [id, o] of owed) {
      if (o.retryAt === undefined) continue;
      // Floored to 100 ms: a few calls for many entries, and never a peer's before its due time.
      const idle = Math.min(d.minIdleMs, Math.max(0, Math.floor((d.minIdleMs - (o.retryAt - now)) / 100) * 100));
      const ids = byIdle.get(idle);
      if (ids) ids.push(id);
      else byIdle.set(idle, [id]);
    }
    for (const [idle, ids] of byIdle) await d.commands.setIdle(stream, d.consumer, ids, idle);
  }
}
