import { compareIds, idBefore } from '../redis/replies.js';
import type { StreamEntry } from '../redis/stream-entry.js';
import type { SettledEvent } from './settled-event.js';

/** Failed entries remembered per stream; past this, a lost group is re-created at `groupStartId`. */
const MAX_FAILED_TRACKED = 10_000;

/**
 * Where this consumer left off in each stream, so that a group lost to NOGROUP (XGROUP DESTROY,
 * a server that lost its data) can be re-created there instead of at `groupStartId`, which
 * would run every entry it already settled again. It remembers the highest id delivered to it
 * and the entries it still owes: those whose handler failed here and that it has not seen
 * settled since (their pending state goes with the group). Entries in hand are the lease's.
 */
export class DeliveryMarks {
  private readonly highest = new Map<string, string>();
  private readonly failed = new Map<string, Set<string>>();
  private readonly overflowed = new Set<string>();

  delivered(entries: readonly StreamEntry[]): void {
    for (const e of entries) {
      const top = this.highest.get(e.stream);
      if (top === undefined || compareIds(e.id, top) > 0) this.highest.set(e.stream, e.id);
    }
  }

  settled(event: SettledEvent): void {
    let ids = this.failed.get(event.stream);
    if (event.outcome !== 'failed') {
      ids?.delete(event.id);
      return;
    }
    if (!ids) this.failed.set(event.stream, (ids = new Set()));
    if (ids.size >= MAX_FAILED_TRACKED) this.overflowed.add(event.stream);
    else ids.add(event.id);
  }

  /** The highest id delivered to this consumer from `stream`, if any. */
  highestOf(stream: string): string | undefined {
    return this.highest.get(stream);
  }

  /**
   * The id to re-create a lost group at: just before the oldest entry this consumer still
   * owes (`held`: in hand or fetched), else its highest delivered id. Undefined when it knows
   * nothing of the stream, or owes more than it could remember (then `groupStartId` it is).
   */
  resumeId(stream: string, held: readonly string[]): string | undefined {
    const top = this.highest.get(stream);
    if (top === undefined || this.overflowed.has(stream)) return undefined;
    let oldestOwed: string | undefined;
    for (const id of [...(this.failed.get(stream) ?? []), ...held]) {
      if (oldestOwed === undefined || compareIds(id, oldestOwed) < 0) oldestOwed = id;
    }
    return oldestOwed === undefined || compareIds(oldestOwed, top) > 0 ? top : idBefore(oldestOwed);
  }
}
