import { defer, EMPTY, from, type Observable } from 'rxjs';
import { reportDeleted, withDeliveryCounts, withoutWaiting } from './fetched-entries.js';
import type { LoopParts } from './loop-parts.js';
import type { StepResult } from './loop-vitals.js';

/** Without a claim, XAUTOCLAIM calls per stream per beat (each scans ~10 × COUNT PEL entries). */
const MAX_EMPTY_SCANS_PER_BEAT = 4;

/**
 * Step 2 of a beat: the retries of this consumer's own failed entries that are due, and (at
 * most once per blockMs) XAUTOCLAIM of entries idle past `minIdleMs`, each stream's cursor
 * carried across beats.
 */
export class Reclaimer {
  private readonly cursors = new Map<string, string>();
  private lastReclaimAt = 0;

  /** Emits what was claimed and settled; nothing when nothing was due (under load: no promise per batch). */
  readonly step$: Observable<StepResult> = defer(() => {
    if (this.p.audit.anyDue() && !this.p.stop.stopped) return from(this.retryThenReclaim());
    return this.reclaimDue() ? from(this.reclaim().then((fetched): StepResult => ({ step: 'reclaim', fetched }))) : EMPTY;
  });

  constructor(private readonly p: LoopParts) {}

  /** Whether `step$` has anything to do now (it decides again when subscribed): under load, nothing. */
  get due(): boolean {
    return (this.p.audit.anyDue() && !this.p.stop.stopped) || Date.now() - this.lastReclaimAt >= this.p.d.options.blockMs;
  }

  private async retryThenReclaim(): Promise<StepResult> {
    const retried = await this.retryOwed();
    const reclaimed = this.reclaimDue() ? await this.reclaim() : 0;
    return { step: 'reclaim', fetched: retried + reclaimed };
  }

  /**
   * An idle beat lasts blockMs; a busy one (the park returned entries at once) can be far
   * shorter, and an XAUTOCLAIM per batch would cost a round trip each: under load, reclaim
   * at most once per blockMs. Recovery still happens within minIdleMs + blockMs.
   */
  private reclaimDue(): boolean {
    const now = Date.now();
    if (now - this.lastReclaimAt < this.p.d.options.blockMs) return false;
    this.lastReclaimAt = now;
    return true;
  }

  /** Failed entries of this consumer due for their retry, claimed back and settled. */
  private async retryOwed(): Promise<number> {
    const entries = await this.p.audit.claimDue();
    this.p.marks.delivered(entries);
    await this.p.settle(entries, 'reclaim');
    return entries.length;
  }

  private async reclaim(): Promise<number> {
    let claimed = 0;
    for (const stream of this.p.d.streams) claimed += await this.reclaimStream(stream);
    return claimed;
  }

  private async reclaimStream(stream: string): Promise<number> {
    const { d, lease, marks, stop, count } = this.p;
    let claimed = 0;
    for (let emptyScans = 0; !stop.stopped && emptyScans < MAX_EMPTY_SCANS_PER_BEAT;) {
      const cursor = this.cursors.get(stream) ?? '0-0';
      const result = await d.commands.autoClaim(stream, d.options.consumer, d.options.minIdleMs, cursor, count);
      this.cursors.set(stream, result.cursor);
      if (result.deletedIds.length > 0) reportDeleted(this.p, stream, result.deletedIds);
      // Ours already, fetched and waiting (a read-ahead whose lease lapsed while the event loop
      // was held): the batch that holds them settles them; settling them here too would run them twice.
      const held = result.entries.length > 0 ? lease.idsOn(stream) : undefined;
      const claimedNow = result.entries.filter((e) => !held!.has(e.id));
      if (claimedNow.length > 0) {
        claimed += claimedNow.length;
        marks.delivered(claimedNow);
        lease.hold(claimedNow);
        await this.p.settle(await withoutWaiting(this.p, await withDeliveryCounts(this.p, claimedNow)), 'reclaim');
      } else {
        emptyScans++;
      }
      if (result.cursor === '0-0') break;
    }
    return claimed;
  }
}
