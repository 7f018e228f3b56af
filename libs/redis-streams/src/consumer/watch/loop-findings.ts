import { Subject, type Observable } from 'rxjs';
import type { StreamEntry } from '../../stream-entry.js';

/**
 * What the acks and the audit found between beats (a lost group, short acks, a failed ack), kept
 * for the group keeper's next check; each finding, and an owed entry falling due, wakes the park.
 * Made before the parts that write to it and the ones that read it, so no part needs another that
 * does not exist yet.
 */
export class LoopFindings {
  /** Short acks not yet explained (see PendingAudit.shortAck): the next beat looks into them. */
  readonly shortAcks: [stream: string, entries: StreamEntry[], missing: number][] = [];
  /** Streams whose group was found lost without an error to say so (see PendingAudit). */
  readonly lossSeen = new Set<string>();
  /** An ack failed since the last flush: the next beat surfaces it. */
  ackFailed = false;
  private readonly wakes = new Subject<void>();
  /** Something for the loop to do now: a parked read should end rather than wait out blockMs. */
  readonly wake$: Observable<void> = this.wakes.asObservable();

  groupLost(stream: string): void {
    this.lossSeen.add(stream);
    this.wake();
  }

  shortAck(stream: string, entries: StreamEntry[], missing: number): void {
    this.shortAcks.push([stream, entries, missing]);
    this.wake();
  }

  /** The next beat flushes it (and restarts): wake a park rather than wait for a batch that may never come. */
  ackFailedNow(): void {
    this.ackFailed = true;
    this.wake();
  }

  wake(): void {
    this.wakes.next();
  }

  /** Something for the keeper's check (under load nothing: the beat skips its promise). */
  get due(): boolean {
    return this.ackFailed || this.lossSeen.size > 0 || this.shortAcks.length > 0;
  }
}
