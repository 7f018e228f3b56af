import { merge, type Observable } from 'rxjs';
import type { Logger } from '../../ports.js';
import type { StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import { DeliveryMarks } from './delivery-marks.js';
import { Lease } from './lease.js';
import { LeftToGroupLog } from './left-to-group-log.js';
import type { LoopFindings } from '../watch/loop-findings.js';
import { PendingAudit, type PendingAuditDeps } from './pending-audit.js';
import type { SettledEvent } from '../settle/settled-event.js';
import { settleInDoubt } from '../settle/settle-sent.js';
import type { StopSignal } from '../stop-signal.js';

export interface CustodyDeps {
  commands: StreamCommands;
  consumer: string;
  minIdleMs: number;
  leaseRenewMs: number;
  maxWaitingRetries: number;
  logger: Logger;
  stop: StopSignal;
  /** Where the audit reports a lost group and wakes the loop. */
  findings: LoopFindings;
  /** Pending entries found trimmed from their stream (data loss), reported once. */
  onDeleted: (stream: string, ids: string[]) => void;
  /** What the audit's checks tell of the connection (see PendingAuditDeps.connection). */
  connection: PendingAuditDeps['connection'];
  /** An entry settled for good here (ack confirmed, failure left pending, dead-lettered). */
  onSettled: (event: SettledEvent) => void;
  /**
   * The streams whose own pending list is looked at, once drained, for entries handed here by hand
   * (see HandedEntries): those not paused; none for an ordered reader (its key queues take such an
   * entry when a reclaim brings it, blocking its key behind it).
   */
  handedLookable: () => readonly string[];
  /**
   * False while this consumer does not hold `stream`'s partition (an ordered reader that lost it):
   * what left its pending list is the new owner's (taken over, maybe settled), never taken back here.
   */
  mayTakeBack: (stream: string) => boolean;
}

/**
 * What one reader holds and owes, behind one narrow interface: the entries in hand (the lease,
 * renewed so no peer takes them), what was delivered and failed here (the delivery marks), the
 * audit that keeps both true against the server, the retries that wait, and the log of entries
 * left to the group. The steps tell it what they fetched, settled or handed back; its timers
 * (lease renewal, audit checks, the due wake) are one Observable, `upkeep$`, that the reader
 * merges into its work, so teardown is unsubscribing.
 */
export class Custody {
  private readonly lease: Lease;
  private readonly marks = new DeliveryMarks();
  private readonly audit: PendingAudit;
  private readonly leftLog: LeftToGroupLog;
  /** Streams whose own pending list the self-drain read to its end since the last (re)start. */
  private readonly drainedStreams = new Set<string>();
  /** Deleted entries reported lately (`stream\nid` → when, performance.now()), see reportDeleted. */
  private readonly reportedDeleted = new Map<string, number>();
  readonly upkeep$: Observable<never>;

  constructor(private readonly d: CustodyDeps) {
    this.lease = new Lease(d.commands, d.consumer, d.leaseRenewMs, d.logger, (stream, lost) => void this.audit.heldLost(stream, lost));
    this.audit = new PendingAudit({
      commands: d.commands,
      lease: this.lease,
      marks: this.marks,
      consumer: d.consumer,
      minIdleMs: d.minIdleMs,
      leaseRenewMs: d.leaseRenewMs,
      maxWaitingRetries: d.maxWaitingRetries,
      logger: d.logger,
      // Not before its self-drain read it (its own entries not yet fetched again would look handed here), nor once stopping.
      lookable: () => (d.stop.stopped ? [] : d.handedLookable().filter((s) => this.drainedStreams.has(s))),
      onDeleted: (stream, ids) => this.reportDeleted(stream, ids),
      mayTakeBack: d.mayTakeBack,
      onGroupLost: (stream) => d.findings.groupLost(stream),
      onDue: () => d.findings.wake(),
      // Once stopping, a check's failure is nobody's news: "retrying in N ms" would promise a retry that never comes.
      connection: { ...d.connection, failed: (error, retryInMs) => d.stop.stopped || d.connection.failed(error, retryInMs) },
    });
    this.leftLog = new LeftToGroupLog(d.logger, d.maxWaitingRetries, d.minIdleMs);
    this.upkeep$ = merge(this.lease.renewals$, this.audit.upkeep$);
  }

  /**
   * The one way out for deleted entries. Two paths can meet one in flight together (an XAUTOCLAIM that drops it, an
   * audit sent before that answer came that finds it gone from the stream): told once (seen in CI, a loaded machine).
   * Only within `leaseRenewMs` of its report, and until it is delivered here again (see received): a later loss of
   * the same id is another entry's (a stream loaded anew with explicit ids: review-c, review-d).
   */
  private reportDeleted(stream: string, ids: readonly string[]): void {
    const now = performance.now();
    const fresh = ids.filter((id) => {
      const key = `${stream}\n${id}`;
      const at = this.reportedDeleted.get(key);
      if (at !== undefined && now - at < this.d.leaseRenewMs) return false;
      // Bounded: a repeat comes within moments, not after thousands of other deletions.
      if (this.reportedDeleted.size >= 10_000) this.reportedDeleted.clear();
      this.reportedDeleted.set(key, now);
      return true;
    });
    if (fresh.length > 0) this.d.onDeleted(stream, fresh);
  }

  // ── What the fetch steps tell it and ask ──

  /**
   * Entries just fetched: delivered here, and held from arrival (`held`: those to hold, when not all are). `sentAt`:
   * when the fetch was sent (performance.now()), as Lease.hold takes it.
   */
  received(entries: readonly StreamEntry[], sentAt: number, held: readonly StreamEntry[] = entries): void {
    // An id reported deleted and delivered again is another entry (its stream loaded anew): its loss is told again
    // (review-c). One size check per fetch when nothing was deleted.
    if (this.reportedDeleted.size > 0) for (const e of entries) this.reportedDeleted.delete(`${e.stream}\n${e.id}`);
    this.audit.deliveredAgain(entries);
    this.marks.delivered(entries);
    this.lease.hold(held, sentAt);
  }

  /** The self-drain read `stream`'s own pending entries to the end. */
  drained(stream: string): void {
    this.drainedStreams.add(stream);
  }

  /** Ids held on `stream` (a lookup set, made on each call). */
  heldOn(stream: string): Set<string> {
    return this.lease.idsOn(stream);
  }

  /** Failed entries waiting here for their retry. */
  get waiting(): number {
    return this.marks.waiting;
  }

  /** Ms until the first owed entry is due; Infinity when none is owed. */
  msUntilDue(): number {
    return this.audit.msUntilDue();
  }

  anyDue(): boolean {
    return this.audit.anyDue();
  }

  /** Owed entries due for their retry, claimed back, delivered and held: the caller settles them. */
  async claimDue(): Promise<StreamEntry[]> {
    const entries = await this.audit.claimDue();
    this.marks.delivered(entries);
    return entries;
  }

  /** Entries trimmed from their stream, reported once: the audit will not report them again when it meets them. */
  deleted(stream: string, ids: string[]): void {
    this.audit.deletedElsewhere(stream, ids);
    this.reportDeleted(stream, ids);
    // Best effort: a record left behind only costs its bytes until a day past its due time.
    this.d.commands.retries.drop(stream, ids).catch(() => undefined);
  }

  /** An entry no longer ours to settle (a peer's now, acked, adopted to wait, acked by us). */
  release(entry: StreamEntry): void {
    this.lease.drop(entry);
  }

  /**
   * A held entry settled without an ack (failed, or dead-lettered): let go, then noted and reported. A failure is owed
   * from when the lease last saw it pending here (-Infinity: no longer held), unless its settle is in doubt.
   */
  settledUnacked(entry: StreamEntry, event: SettledEvent): void {
    const confirmedAt = this.lease.confirmedAt(entry) ?? -Infinity;
    this.release(entry);
    this.settled(event, confirmedAt, !settleInDoubt(entry));
  }

  /** A peer's entry waiting for its retry, kept waiting here (`count` tries so far, due in `retryInMs`). */
  adopt(stream: string, id: string, count: number, retryInMs: number): void {
    this.audit.scheduled(this.marks.adopt(stream, id, count, retryInMs));
  }

  /** Waiting entries left to the group past maxWaitingRetries (see LeftToGroupLog). */
  leftToGroup(stream: string, ids: readonly string[]): void {
    this.leftLog.note(stream, ids);
  }

  /** Logs the entries left to the group, of the streams `done` names (all when omitted). */
  flushLeft(done?: (stream: string) => boolean): void {
    this.leftLog.flush(done);
  }

  // ── What settling and acking tell it ──

  /** When a held entry was last known pending under this consumer with its idle reset; undefined when not held. */
  confirmedAt(entry: StreamEntry): number | undefined {
    return this.lease.confirmedAt(entry);
  }

  /** An entry's outcome is final here: noted (a failure is owed and scheduled, unless `owed` is false), then reported. Nothing counts once abandoned. */
  settled(event: SettledEvent, confirmedAt?: number, owed = true): void {
    if (this.d.stop.abandoned) return;
    const retryAt = this.marks.settled(event, confirmedAt, owed);
    if (retryAt !== undefined) this.audit.scheduled(retryAt);
    this.d.onSettled(event);
  }

  /** Held entries not started: their idle set to `idleMs`, so the next peer's beat takes them. */
  handBack(entries: readonly StreamEntry[], idleMs: number): Promise<void> {
    return this.lease.handBack(entries, idleMs);
  }

  ackSent(entries: readonly StreamEntry[]): void {
    this.lease.ackSent(entries);
  }

  ackConfirmed(entries: readonly StreamEntry[]): void {
    this.lease.ackConfirmed(entries);
  }

  // ── What the group keeper needs at a (re)start and a rejoin ──

  /** A restart: nothing is held any more (self-drain fetches it again) and the audit is suspended; the ids that were held, by stream. */
  restart(): Map<string, string[]> {
    const held = this.lease.heldIds();
    this.drainedStreams.clear();
    this.audit.suspend();
    this.lease.clear();
    return held;
  }

  /** The groups exist again (rejoined where lost): the audit resumes. */
  resume(): void {
    this.audit.resume();
  }

  /** The highest id delivered here on `stream`; undefined when none (or forgotten). */
  highestOf(stream: string): string | undefined {
    return this.marks.highestOf(stream);
  }

  /** `stream` was written anew (its ids start over): what was delivered from it is forgotten. */
  forget(stream: string): void {
    this.marks.forget(stream);
  }

  /**
   * What this consumer still owes on `stream` (failed here, and `held`), with delivery counts, and whether a rejoin
   * may take one back from nobody's pending list though the group lists this consumer (as the audit would: see
   * PendingAudit.mayReown).
   */
  owed(stream: string, held: readonly string[]): [id: string, deliveryCount: number, reown: boolean][] {
    return this.marks.owed(stream, held, (o) => this.audit.mayReown(stream, o));
  }

  /** After a rejoin: of the `owed`, those back `pending` under this consumer stay owed. */
  keepOwned(stream: string, owed: readonly (readonly [id: string, count: number, ...rest: unknown[]])[], pending: readonly string[]): void {
    this.marks.keepOwned(stream, owed, pending);
  }

  /** Failed entries past what the marks track on `stream` (not retried), counted once. */
  takeUntracked(stream: string): number {
    return this.marks.takeUntracked(stream);
  }

  /** Explains a short ack (see PendingAudit.shortAck). */
  explainShortAck(stream: string, entries: StreamEntry[], missing: number): Promise<void> {
    return this.audit.shortAck(stream, entries, missing);
  }

  // ── What stopping needs, and health ──

  /** At a graceful stop, after the last beat: entries waiting for a retry become a peer's at their due time. */
  handBackWaiting(): Promise<void> {
    this.audit.suspend();
    return this.audit.handBackWaiting();
  }

  /**
   * After close() gave up on a hung handler: nothing held counts any more, and what was held but
   * not `begun` is handed back (idle `idleMs`). True when Redis confirmed it (or there was none).
   */
  abandon(begun: readonly StreamEntry[], idleMs: number): Promise<boolean> {
    const unstarted = this.lease.heldIds(begun);
    this.audit.suspend();
    this.lease.clear();
    return this.lease.handBackIds(unstarted, idleMs);
  }

  /** The reader's work is over (its last ack confirmed, or torn down): what is still out may fail quietly. */
  end(): void {
    this.audit.suspend();
    this.lease.clear();
  }

  /** Ids held, by stream. */
  heldIds(): Map<string, string[]> {
    return this.lease.heldIds();
  }

  /** Entries held (fetched, not yet settled). */
  entries(): { stream: string; id: string }[] {
    return this.lease.entries();
  }

  /** How many entries are held, per stream. */
  counts(): Map<string, number> {
    return this.lease.counts();
  }
}
