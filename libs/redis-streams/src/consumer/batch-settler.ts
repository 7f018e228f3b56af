import type { StreamEntry } from '../redis/stream-entry.js';
import type { AckPipeline } from './ack-pipeline.js';
import type { Lease } from './lease.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';

export interface BatchSettlerDeps {
  lease: Lease;
  acks: AckPipeline;
  /** Decides one entry; `'acked'` means "handler succeeded, ack it" (the ack is ours to send). */
  settle: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  onSettled: (event: SettledEvent) => void;
  concurrency: number;
  /** Idle time given to fetched entries that were not started when the loop stops. */
  handBackIdleMs: number;
  stopping: () => boolean;
  /** `close()` gave up waiting: whatever finishes late changes nothing (no ack, no hand-back, no event). */
  abandoned: () => boolean;
  /** Batches being settled, and how far each got: what `close()` hands back after a hung handler. */
  inProgress: Set<BatchProgress>;
}

export interface BatchProgress {
  readonly entries: readonly StreamEntry[];
  /** Entries before this index have had their handler called. */
  next: number;
}

/**
 * Settles one fetched batch (leased by whoever fetched it): up to `concurrency` entries at a
 * time, in fetch order, and all successful ones acked together in one round trip when the
 * batch is done (sent, not awaited: see AckPipeline). Until the ack is confirmed their lease
 * is kept, so no peer can take them. When the loop stops, entries not yet started are handed
 * back and the ones in hand finish and are acked.
 */
export async function settleBatch(d: BatchSettlerDeps, entries: readonly StreamEntry[], source: DeliverySource): Promise<void> {
  if (entries.length === 0) return;
  // Parallel arrays: no wrapper object per entry on the hot path.
  const succeeded: StreamEntry[] = [];
  const events: SettledEvent[] = [];
  const progress: BatchProgress = { entries, next: 0 };
  d.inProgress.add(progress);
  const worker = async (): Promise<void> => {
    while (progress.next < entries.length && !d.stopping()) {
      const entry = entries[progress.next++]!;
      const event = await d.settle(entry, source);
      if (d.abandoned()) return;
      if (event.outcome === 'acked') {
        succeeded.push(entry);
        events.push(event);
      } else {
        d.lease.drop(entry);
        d.onSettled(event);
      }
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: Math.min(d.concurrency, entries.length) }, worker));
  d.inProgress.delete(progress);
  if (d.abandoned()) return;
  const { next } = progress;
  if (next < entries.length) await d.lease.handBack(entries.slice(next), d.handBackIdleMs);
  if (succeeded.length > 0) await d.acks.send(succeeded, events);
  // A Redis failure inside settle (dead-lettering): the rest was still finished and acked first.
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
}
