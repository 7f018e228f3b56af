import { describeError } from '../../describe-error.js';
import { someIds } from '../../id-list.js';
import type { Logger } from '../../ports.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { AckPipeline } from './ack-pipeline.js';
import type { Custody } from '../custody/custody.js';
import { handlerEnded, handlerStarted, type BatchProgress } from './batch-progress.js';
import type { StopSignal } from '../stop-signal.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import { acked, Deciding, type DirectDecide } from './decide.js';
import { isRecording } from './retry-schedule.js';

export interface BatchSettlerDeps {
  /** Holds the batch's entries until each is settled: a failure is noted there, the rest handed back at a stop. */
  custody: Pick<Custody, 'release' | 'handBack' | 'settledUnacked'>;
  acks: Pick<AckPipeline, 'send'>;
  /** Decides one entry; `'acked'` means "handler succeeded, ack it" (the ack is ours to send). */
  decide: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  /** `decide` split: the worker awaits the handler's own promise, with no promise of decide's per entry (`decide` when unset). */
  direct?: DirectDecide | undefined;
  /** A batch handler's loop: entries go to it `maxSize` at a time, one event each (see decideBatch). */
  batchHandler?:
    { maxSize: number; decide: (entries: readonly StreamEntry[], source: DeliverySource) => Promise<SettledEvent[]> } | undefined;
  concurrency: number;
  /** Idle time given to fetched entries that were not started when the loop stops. */
  handBackIdleMs: number;
  /** The loop's stop signal; abandoned (`close()` gave up waiting): whatever finishes late changes nothing (no ack, no hand-back, no event). */
  stop: StopSignal;
  /** Batches being settled, and how far each got: what `close()` hands back after a hung handler. */
  inProgress: Set<BatchProgress>;
  /** Whether the reader's intake holds a stream back now (the operator's pause): its entries not started yet are put back, not started. */
  barred?: (stream: string) => boolean;
  /** Hands back entries read and not started, with the delivery counts they had before the read (idle `handBackIdleMs`). */
  putBack?: (entries: readonly StreamEntry[], idleMs: number) => Promise<void>;
  logger: Logger;
}

/** Settles one fetched batch (see settleBatch): what every fetch step hands its entries to. */
export type SettleFetched = (entries: readonly StreamEntry[], source: DeliverySource, inHand?: number) => Promise<void>;

/** `entries 1-0, 2-0, 3-0 and 7 more of "orders"`, for a log line. */
export const idList = (entries: readonly StreamEntry[]): string =>
  `entries ${someIds(entries.map((e) => e.id))} of ${[...new Set(entries.map((e) => `"${e.stream}"`))].join(', ')}`;

/**
 * Settles one fetched batch (leased by whoever fetched it): up to `concurrency` entries (or,
 * for a batch handler, calls of up to `maxSize` entries) at a time, in fetch order, and all
 * successful ones acked together in one round trip when the batch is done (sent, not
 * awaited: see AckPipeline). Until the ack is confirmed their lease is kept, so no peer can
 * take them. When the loop stops, entries not yet started are handed back and the ones in
 * hand finish and are acked; the first `inHand` entries count as in hand (a batch handler's
 * batch that was still filling, an entry a limited park read before its grant came).
 * An entry whose stream is barred when its turn comes (paused) is not started: it goes back to the
 * group with its delivery count put back (a pause costs no delivery), to be read again after the resume.
 */
export async function settleBatch(d: BatchSettlerDeps, entries: readonly StreamEntry[], source: DeliverySource, inHand = 0): Promise<void> {
  if (entries.length === 0) return;
  // Parallel arrays: no wrapper object per entry on the hot path.
  let succeeded: StreamEntry[] = [];
  let events: SettledEvent[] = [];
  const progress: BatchProgress = { entries, next: 0, startedAt: new Array<number>(entries.length).fill(NaN) };
  d.inProgress.add(progress);
  // Not started: held back when their turn came (a pause seen meanwhile stops what the batch has not started).
  const held: StreamEntry[] = [];
  const holdBack = (entry: StreamEntry, at: number): boolean => {
    if (at < inHand || !d.barred?.(entry.stream)) return false;
    held.push(entry);
    return true;
  };
  const settled = (entry: StreamEntry, event: SettledEvent) => {
    if (event.outcome === 'acked') {
      succeeded.push(entry);
      events.push(event);
    } else {
      d.custody.settledUnacked(entry, event);
    }
  };
  const { batchHandler, direct } = d;
  const worker = batchHandler
    ? async (): Promise<void> => {
        while (progress.next < entries.length && (!d.stop.stopped || progress.next < inHand)) {
          const from = progress.next;
          progress.next = Math.min(entries.length, from + batchHandler.maxSize);
          // The common case, a batch that is one call: no copy.
          let chunk = from === 0 && progress.next === entries.length ? entries : entries.slice(from, progress.next);
          if (d.barred) chunk = chunk.filter((entry, i) => !holdBack(entry, from + i));
          if (chunk.length === 0) continue;
          handlerStarted(progress, from, progress.next);
          const decided = await batchHandler.decide(chunk, source);
          handlerEnded(progress, from, progress.next);
          if (d.stop.abandoned) return;
          // The common case, the whole batch in one call and all of it acked: its arrays are the ack's, no copy per entry.
          if (succeeded.length === 0 && chunk === entries && decided.every((e) => e.outcome === 'acked')) {
            succeeded = chunk as StreamEntry[];
            events = decided;
            continue;
          }
          for (let i = 0; i < chunk.length; i++) settled(chunk[i]!, decided[i]!);
        }
      }
    : async (): Promise<void> => {
        // Failed entries whose retry record is on its way: the next entries start meanwhile, so a run of failures
        // costs one round trip, not one each. Settled after the loop (each due retryInMs after its record, see
        // markScheduled), before the batch's acks, also when a later entry's settle threw.
        let recording: [StreamEntry, Promise<SettledEvent>][] | undefined;
        let thrown: { reason: unknown } | undefined;
        try {
          while (progress.next < entries.length && (!d.stop.stopped || progress.next < inHand)) {
            const at = progress.next++;
            const entry = entries[at]!;
            if (d.barred && holdBack(entry, at)) continue;
            handlerStarted(progress, at, at + 1);
            let event: SettledEvent;
            if (!direct) event = await d.decide(entry, source);
            else {
              const started = direct.start(entry, source);
              if (started instanceof Deciding) event = await started.event;
              else {
                try {
                  await started;
                  event = acked(entry, source);
                } catch (error) {
                  const failing = direct.failed(entry, source, error);
                  if (failing instanceof Promise && isRecording(failing)) {
                    handlerEnded(progress, at, at + 1);
                    (recording ??= []).push([entry, failing]);
                    continue;
                  }
                  event = await failing;
                }
              }
            }
            handlerEnded(progress, at, at + 1);
            if (d.stop.abandoned) break;
            settled(entry, event);
          }
        } catch (reason) {
          thrown = { reason };
        }
        // One that rejects is not settled, as before; the others still are. (A logger that throws on the line no longer
        // rejects one: the engine's logger is guarded, guarded-logger.ts.)
        for (const [entry, failing] of recording ?? []) {
          const event = await failing.catch((reason: unknown) => void (thrown ??= { reason }));
          if (event && !d.stop.abandoned) settled(entry, event);
        }
        if (thrown) throw thrown.reason;
      };
  const units = batchHandler ? Math.ceil(entries.length / batchHandler.maxSize) : entries.length;
  const workers = Math.min(d.concurrency, units);
  const failure = await runWorkers(worker, workers);
  d.inProgress.delete(progress);
  if (d.stop.abandoned) return;
  const { next } = progress;
  const { stop, logger } = d;
  const rest = entries.slice(next);
  if (rest.length > 0) await stop.bounded(d.custody.handBack(rest, d.handBackIdleMs), () => `hand-back of ${idList(rest)}`, logger);
  if (held.length > 0 && d.putBack) {
    for (const entry of held) d.custody.release(entry);
    await stop
      .bounded(d.putBack(held, d.handBackIdleMs), () => `the put-back of ${idList(held)} (paused)`, logger)
      .catch((err: unknown) =>
        logger.warn(`could not put back ${idList(held)} (paused): ${describeError(err)}; they come back once idle ${d.handBackIdleMs} ms`),
      );
  }
  if (succeeded.length > 0) await stop.bounded(d.acks.send(succeeded, events), () => `an earlier ack before ${idList(succeeded)}`, logger);
  // A Redis failure inside settle (dead-lettering): the rest was still finished and acked first.
  if (failure) throw failure.reason;
}

/** Runs `workers` copies of `worker` at once: the first failure, if any. */
async function runWorkers(worker: () => Promise<void>, workers: number): Promise<{ reason: unknown } | undefined> {
  // One worker (concurrency 1, or a batch handler's batch that is one call): awaited alone, no array of outcomes per batch.
  if (workers === 1)
    return worker().then(
      () => undefined,
      (reason: unknown) => ({ reason }),
    );
  return (await Promise.allSettled(Array.from({ length: workers }, worker))).find(
    (o): o is PromiseRejectedResult => o.status === 'rejected',
  );
}
