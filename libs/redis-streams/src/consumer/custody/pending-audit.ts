import { defer, exhaustMap, filter, ignoreElements, interval, merge, tap, type Observable } from 'rxjs';
import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import { someIds } from '../../id-list.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { Owed } from './delivery-marks.js';
import { auditOwed, leftToRejoin, noPeerCouldClaim, type LostGroups, type OwedAuditDeps } from './owed-audit.js';
import { DueClock, handBackWaiting, touchWaiting, type RetryWaitsDeps } from './retry-waits.js';
import { counted } from '../../readable.js';
import { HandedEntries } from './handed-entries.js';

export interface PendingAuditDeps extends OwedAuditDeps, RetryWaitsDeps {
  /** Most entries waiting for a retry here (an entry taken in past it is left to the group). */
  maxWaitingRetries: number;
  /** The streams whose own pending list is looked at for entries handed here by hand: drained since the (re)start, not paused. */
  lookable: () => readonly string[];
  /** The stream or the group is gone, or acks say the group no longer lists this consumer: the loop's lost-group path. */
  onGroupLost: (stream: string) => void;
  /** An owed entry is due for its retry (`claimDue`): wake the loop. */
  onDue: () => void;
  /**
   * The connections' report, as the checks see it: a check that failed (`failed`: true when the report tells it, no
   * answer or a lost connection, once per outage); whether an outage the checks saw is open (`silent`); and its end
   * (`answered`, after a call that Redis answered: a check may ask it nothing).
   */
  connection: { failed: (error: unknown, retryInMs: number) => boolean; silent: () => boolean; answered: () => void };
}

/**
 * Keeps what this consumer believes is pending under it true, so that an operator's command on a
 * live group loses nothing and a peer's completed work does not run again:
 * - every `leaseRenewMs`, the entries it failed and owes are checked; the loop, between batches,
 *   claims back for their retry those idle `minIdleMs - leaseRenewMs` or more (`claimDue`), before
 *   any peer's reclaim could take them: a failed entry is retried by the consumer that failed it
 *   while that one lives and beats (one stuck in a handler leaves them to its peers' reclaim);
 * - held entries a lease renewal found gone, and acks that came back short, are explained.
 * An entry in nobody's pending list (XGROUP DELCONSUMER drops a consumer's list; an XACK by hand)
 * is taken back when no peer can have claimed it yet (last seen here less than
 * `minIdleMs - leaseRenewMs` ago), or when it waits for a scheduled retry whose record is still
 * there (nobody tried it since); otherwise a peer may have settled it while this consumer was
 * held up, and it is left alone. Once the group is found lost (gone, no longer listing this
 * consumer, or re-created below an entry it fetched), such entries are the rejoin's to take back
 * instead, whatever the time (see LostGroups). Trimmed entries are reported once as `deleted`.
 */
export class PendingAudit {
  /** Between a (re)start's rejoin and the next restart: checks run, and due times are kept. */
  private active = false;
  /** When the first owed entry is due, as of the last check; wakes the loop then. */
  private readonly due = new DueClock();
  /** When the first owed entry without a scheduled retry is due, as of the last scan. */
  private unscheduledDueAt = Infinity;
  /** The owed-entry audits, one at a time: two at once would report a deleted entry twice. */
  private owedTurn: Promise<unknown> = Promise.resolve();
  /** Entries already explained (deleted, a peer's, dropped): their short ack says nothing new. */
  private readonly explained = new Set<string>();
  /** Streams whose group was found lost since the loop last (re)started, i.e. rejoined them. */
  private readonly lostStreams = new Set<string>();
  private readonly lost: LostGroups = {
    has: (stream) => this.lostStreams.has(stream),
    add: (stream) => {
      this.lostStreams.add(stream);
      this.d.onGroupLost(stream);
    },
  };

  /**
   * The audit's timers, part of the reader's upkeep (unsubscribing ends them): twice a lease period
   * a check of what is owed (an entry dropped at any idle time up to minIdleMs - leaseRenewMs / 2
   * is seen while no peer can have it), and a wake when the first owed entry falls due.
   */
  readonly upkeep$: Observable<never> = merge(
    defer(() => interval(this.checkEveryMs)).pipe(
      filter(() => this.active),
      exhaustMap(() => this.check()),
    ),
    this.due.due$.pipe(tap(() => this.d.onDue())),
  ).pipe(ignoreElements());

  /** Entries an operator's XCLAIM handed to this consumer, taken in at each check. */
  private readonly handed: HandedEntries;

  constructor(private readonly d: PendingAuditDeps) {
    this.handed = new HandedEntries(d);
  }

  /** Twice a lease period (see upkeep$). */
  private get checkEveryMs(): number {
    return Math.max(1, Math.floor(this.d.leaseRenewMs / 2));
  }

  /** One timed check. What it finds of the connection is the report's to tell (maybe it alone sees an outage: a long park). */
  private async check(): Promise<void> {
    const { connection } = this.d;
    try {
      await this.checkOwed();
      // An outage the checks saw ends when Redis answers them: a ping, since the check may have asked it nothing.
      if (connection.silent()) {
        await this.d.commands.ping();
        connection.answered();
      }
    } catch (err) {
      // Paused meanwhile (a restart, the reader's end): not news, and may come after close().
      if (this.active && !connection.failed(err, this.checkEveryMs))
        this.d.logger.warn(`check of owed entries failed: ${describeError(err)}`);
    }
  }

  /** Idle time at which an owed entry is claimed back for its retry; also how recent a sighting must be to take an entry back. */
  private get safeIdleMs(): number {
    return Math.max(1, this.d.minIdleMs - this.d.leaseRenewMs);
  }

  /**
   * An owed entry found in nobody's pending list may be taken back: last seen pending here too recently for any
   * peer's reclaim to have taken it (and settled it), on a stream that is still this consumer's.
   */
  mayReown(stream: string, o: Owed): boolean {
    return this.d.mayTakeBack(stream) && noPeerCouldClaim(this.d, o.confirmedAt, o.idleMs);
  }

  /** After the groups were ensured (and rejoined where lost): checks run. */
  resume(): void {
    this.lostStreams.clear();
    this.active = true;
  }

  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.owedTurn.then(work, work);
    this.owedTurn = run.catch(() => undefined);
    return run;
  }

  /** A restart, a stop or an abandon: no check runs and nothing wakes the loop until `resume`. */
  suspend(): void {
    this.active = false;
    this.due.clear();
  }

  /** At a graceful stop, after the last beat: see handBackWaiting. */
  handBackWaiting(): Promise<void> {
    // In turn: after a check still running, whose idle resets would otherwise undo the hand-back.
    return this.inTurn(() => handBackWaiting(this.d));
  }

  /** A failure was scheduled for its retry at `retryAt` (performance.now()): the loop is woken then. */
  scheduled(retryAt: number): void {
    if (this.active) this.due.lower(retryAt);
  }

  /** Ms until the first owed entry is due (as of the last check); Infinity when none is owed. */
  msUntilDue(): number {
    return this.due.msUntil();
  }

  /** An owed entry may be due for its retry (as of the last check). */
  anyDue(): boolean {
    return this.due.msUntil() <= 0;
  }

  /**
   * Owed entries due for their retry, claimed back (a delivery each) and held: the caller settles
   * them. Due: a scheduled retry's time has come, or (without one) idle `minIdleMs − leaseRenewMs`.
   */
  claimDue(): Promise<StreamEntry[]> {
    this.due.clear();
    return this.inTurn(async () => {
      const now = performance.now();
      const claimed: StreamEntry[] = [];
      try {
        // Scheduled ones off the due-time heap (not a scan of every waiting entry per beat).
        for (const [stream, due] of this.d.marks.takeDueRetries(now))
          await auditOwed(this.d, this.lost, stream, due, this.safeIdleMs, claimed);
      } catch (err) {
        // Not claimed: back on the schedule, tried again next beat.
        this.d.marks.rescheduleAll();
        throw err;
      }
      if (this.unscheduledDueAt <= now) {
        await this.eachOwed((o) => o.retryAt === undefined && now - o.confirmedAt + o.idleMs >= this.safeIdleMs, this.safeIdleMs, claimed);
        this.unscheduledDueAt = this.unscheduledNext();
      }
      // What is left: the next due time (no wake here: the beat that claimed goes on to park, and looks again next beat).
      this.noteNextDue();
      return claimed;
    });
  }

  /** Deleted ids reported by another path (XAUTOCLAIM, self-drain): not to be reported again when an audit or an ack meets them. */
  deletedElsewhere(stream: string, ids: readonly string[]): void {
    for (const id of ids) {
      this.d.marks.forgetOwed(stream, id);
      this.explain(stream, id);
    }
  }

  /** A lease renewal found these held entries no longer pending under this consumer. */
  async heldLost(stream: string, found: readonly { entry: StreamEntry; confirmedAt: number }[]): Promise<void> {
    const lost: { entry: StreamEntry; confirmedAt: number }[] = [];
    // Decided now, as the audit is sent: settled by us since (dropped, or its settle sent) is ours, not lost.
    for (const l of this.d.lease.withoutSettling(found)) {
      if (this.d.lease.confirmedAt(l.entry) === undefined) continue;
      // Reported deleted already: nothing to find out, and no renewal to spend on it.
      if (this.explained.has(key(stream, l.entry.id))) this.d.lease.drop(l.entry);
      else lost.push(l);
    }
    if (lost.length === 0) return;
    const sentAt = performance.now();
    const mayTake = this.d.mayTakeBack(stream);
    const items = lost.map(({ entry, confirmedAt }) => ({
      id: entry.id,
      kind: 'held' as const,
      reown: mayTake && noPeerCouldClaim(this.d, confirmedAt, 0),
      count: entry.deliveryCount,
    }));
    const result = await this.d.commands.audit(stream, this.d.consumer, undefined, items).catch((err: unknown) => {
      if (this.active)
        this.d.logger.warn(
          `could not check ${counted(items.length, 'entry', 'entries')} in hand on "${stream}" that the lease found gone: ${describeError(err)}`,
        );
      return undefined;
    });
    if (result === undefined) return;
    if (result === null) return this.lost.add(stream);
    const groupLost = !result.known || this.lost.has(stream);
    // A partition this consumer lost: nothing leaves for a rejoin; the new owner took (or takes) it all.
    const rejoinable = (status: string) => mayTake && leftToRejoin(status, groupLost);
    const byId = new Map(lost.map(({ entry }) => [entry.id, entry]));
    const deleted: string[] = [];
    const kept: string[] = [];
    // Said once per kind and round, not per entry (a partition taken over finds a whole batch so).
    const reowned: string[] = [];
    const gone: string[] = [];
    const others = new Map<string, string[]>();
    for (const f of result.findings) {
      const entry = byId.get(f.id)!;
      if (f.status === 'mine' || f.status === 'reowned') {
        this.d.lease.confirm(entry, sentAt);
        if (f.status === 'reowned') reowned.push(f.id);
        continue;
      }
      if (rejoinable(f.status)) {
        // Still held (a batch or read-ahead not yet handled must not be given up): the rejoin takes it back.
        kept.push(f.id);
        continue;
      }
      this.d.lease.drop(entry);
      this.explain(stream, f.id);
      if (f.status === 'deleted') deleted.push(f.id);
      else if (f.status === 'other') others.set(f.owner, [...(others.get(f.owner) ?? []), f.id]);
      else gone.push(f.id);
    }
    const entries = (ids: readonly string[]) => `${ids.length === 1 ? 'entry' : 'entries'} ${someIds(ids)} of "${stream}" in hand`;
    if (reowned.length > 0)
      this.d.logger.warn(
        `${entries(reowned)} ${reowned.length === 1 ? 'was' : 'were'} in nobody's pending list (XGROUP DELCONSUMER of this consumer, or an XACK by hand): taken back`,
      );
    for (const [owner, ids] of others)
      this.d.logger.warn(
        `${entries(ids)} ${ids.length === 1 ? 'is' : 'are'} now "${escapeControl(owner)}"'s (claimed by hand, or after this consumer's lease lapsed): a success here still acks ${ids.length === 1 ? 'it' : 'them'} (done once, not twice), a failure is left to it`,
      );
    if (gone.length > 0)
      this.d.logger.warn(
        `${entries(gone)} no longer pending: a peer took and settled ${gone.length === 1 ? 'it' : 'them'} (the partition's new owner, or while this consumer was held up past minIdleMs), an operator acked ${gone.length === 1 ? 'it' : 'them'} or ran XGROUP DELCONSUMER, or an ack of this consumer's that timed out reached Redis after all`,
      );
    if (deleted.length > 0) this.d.onDeleted(stream, deleted);
    // Once per loss: until the rejoin, each renewal finds them so again.
    if (kept.length > 0 && !this.lost.has(stream))
      this.d.logger.warn(
        `entries ${someIds(kept)} of "${stream}" in hand are in nobody's pending list and the group was lost to this consumer (re-created, or the consumer deleted from it): kept, taken back when it rejoins the group`,
      );
    if ((!result.known && mayTake) || kept.length > 0) this.lost.add(stream);
  }

  /**
   * Acks on `stream` found `missing` of these entries no longer pending. Trimmed ones are reported
   * as deleted (once); a group that no longer lists this consumer was lost (the loop rejoins).
   */
  async shortAck(stream: string, entries: readonly StreamEntry[], missing: number): Promise<void> {
    const unexplained = entries.filter((e) => !this.explained.delete(key(stream, e.id)));
    missing -= entries.length - unexplained.length;
    if (missing <= 0) return;
    const result = await this.d.commands.audit(
      stream,
      this.d.consumer,
      undefined,
      unexplained.map((e) => ({ id: e.id, kind: 'held' as const, reown: false, count: e.deliveryCount })),
    );
    // Gone, no longer listing this consumer, or re-created below what it acked: what else it holds and owes went with it.
    if (result === null || !result.known || result.findings.some((f) => f.status === 'above')) return this.lost.add(stream);
    const deleted = result.findings.filter((f) => f.status === 'deleted').map((f) => f.id);
    if (deleted.length > 0) this.d.onDeleted(stream, deleted);
    if (missing > deleted.length) {
      this.d.logger.warn(
        `acks on "${stream}" found ${counted(missing - deleted.length, 'entry', 'entries')} no longer pending: a peer took and settled ${missing - deleted.length === 1 ? 'it' : 'them'} while this consumer was held up past minIdleMs, or an operator acked ${missing - deleted.length === 1 ? 'it' : 'them'} or ran XGROUP DELCONSUMER`,
      );
      // Whatever dropped them may have dropped the entries it owes too: look now, not a lease period later.
      await this.checkOwed();
    }
  }

  /**
   * Entries handed here by hand taken in; owed entries checked (none claimed), the idle time of those
   * waiting for a scheduled retry reset when due for it; notes when the first is due.
   */
  private async checkOwed(): Promise<void> {
    await this.inTurn(async () => {
      const lookable = this.d.lookable();
      if (lookable.length > 0) await this.handed.look(lookable);
      // Waiting ones are not audited each time (20,000 waiting would cost Redis ~10,000 XPENDING a second):
      // their idle reset says they are still ours, and only those it finds gone are audited.
      if (this.d.marks.unscheduled > 0) await this.eachOwed((o) => o.retryAt === undefined, undefined, []);
      for (const [stream, gone] of await touchWaiting(this.d)) await auditOwed(this.d, this.lost, stream, gone, undefined, []);
    });
    this.unscheduledDueAt = this.unscheduledNext();
    this.noteNextDue();
    if (this.anyDue()) this.d.onDue();
  }

  private noteNextDue(): void {
    if (this.active) this.due.set(Math.min(this.d.marks.nextRetryAt(), this.unscheduledDueAt));
  }

  /** When the first owed entry without a scheduled retry is due (a scan: at checks and after claiming them, not per beat). */
  private unscheduledNext(): number {
    let next = Infinity;
    if (this.d.marks.unscheduled === 0) return next;
    for (const [, owed] of this.d.marks.owedMaps())
      for (const [, o] of owed) if (o.retryAt === undefined) next = Math.min(next, o.confirmedAt - o.idleMs + this.safeIdleMs);
    return next;
  }

  /** Audits the owed entries `pick` chooses, claiming those idle `claimIdleMs` or more into `claimed`. */
  private async eachOwed(pick: (o: Owed) => boolean, claimIdleMs: number | undefined, claimed: StreamEntry[]): Promise<void> {
    for (const [stream, owed] of this.d.marks.owedByStream())
      await auditOwed(
        this.d,
        this.lost,
        stream,
        owed.filter(([, o]) => pick(o)),
        claimIdleMs,
        claimed,
      );
  }

  /** Delivered here again (an id reused after its stream was loaded anew): a new entry, nothing explained of it yet. */
  deliveredAgain(entries: readonly StreamEntry[]): void {
    if (this.explained.size === 0) return;
    for (const e of entries) this.explained.delete(key(e.stream, e.id));
  }

  private explain(stream: string, id: string): void {
    // Explained entries whose ack never comes (their handler failed) must not pile up.
    if (this.explained.size >= 10_000) this.explained.clear();
    this.explained.add(key(stream, id));
  }
}

const key = (stream: string, id: string): string => `${stream}\n${id}`;
