import { defer, EMPTY, expand, type Observable } from 'rxjs';
import type { DrainRead } from '../../redis/read/fetch-commands.js';
import type { SettleFetched } from '../settle/batch-settler.js';
import type { Custody } from '../custody/custody.js';
import { dropDeleted, withDeliveryCounts, withoutWaiting, type ArrivalDeps } from './fetched-entries.js';
import type { StepResult } from '../watch/loop-vitals.js';
import { ReadAhead } from './read-ahead.js';
import type { StopSignal } from '../stop-signal.js';

/** What self-drain reads, holds and hands its entries to. */
export interface SelfDrainDeps extends ArrivalDeps {
  stop: StopSignal;
  streams: readonly string[];
  /** What a (re)start drains (the streams not paused); all of `streams` when absent. */
  drainable?: () => readonly string[];
  /** COUNT of each read. */
  count: number;
  /** Send the next read while a batch is handled. */
  readAhead: boolean;
  custody: ArrivalDeps['custody'] & Pick<Custody, 'received' | 'handBack' | 'drained'>;
  settle: SettleFetched;
}

/**
 * Step 1, at every (re)start: this consumer's own pending entries, oldest first (XREADGROUP …
 * 0 on the command lane), settled read by read until a read comes back empty.
 */
export function selfDrain$(d: SelfDrainDeps): Observable<StepResult> {
  return defer(() => {
    const drain = new Drain(d);
    const read$ = defer(() => drain.once());
    // What it leaves to the group is logged by the next reclaim round (or the loop's end), with a sweep's.
    return read$.pipe(expand((r) => (r.fetched > 0 && !d.stop.stopped ? read$ : EMPTY)));
  });
}

/**
 * Each read brings its entries' delivery counts in the same round trip, and the next read is
 * sent as soon as one arrives (a {@link ReadAhead}, as the park's): Redis serves it while this
 * batch is handled.
 */
class Drain {
  /** Where each stream's next read starts; a stream drops out once it reads back empty. */
  private readonly next: Map<string, string>;
  private readonly ahead = new ReadAhead<DrainRead>((r) => r.entries);

  constructor(private readonly d: SelfDrainDeps) {
    this.next = new Map((d.drainable?.() ?? d.streams).map((s) => [s, '0']));
  }

  async once(): Promise<StepResult> {
    const { d } = this;
    if (d.stop.stopped) {
      await this.handBack();
      return { step: 'drain', fetched: 0 };
    }
    const read = await (this.ahead.take() ?? this.read());
    if (!read) return { step: 'drain', fetched: 0 };
    const { entries, retriesWaiting } = read;
    for (const s of [...this.next.keys()]) {
      const last = entries.findLast((e) => e.stream === s);
      if (last) this.next.set(s, last.id);
      else {
        this.next.delete(s);
        d.custody.drained(s);
      }
    }
    if (this.next.size > 0 && d.readAhead) {
      const ahead = this.read();
      if (ahead) this.ahead.keep(ahead);
    }
    const live = await dropDeleted(d, entries);
    await d.settle(await withoutWaiting(d, await withDeliveryCounts(d, live, true), retriesWaiting), 'drain');
    if (d.stop.stopped) await this.handBack();
    return { step: 'drain', fetched: entries.length };
  }

  private read(): Promise<DrainRead> | undefined {
    const streams = [...this.next.keys()];
    if (streams.length === 0) return undefined;
    const { d } = this;
    const sentAt = performance.now();
    const read = d.commands.fetch.drainRead(
      d.consumer,
      streams,
      streams.map((s) => this.next.get(s)!),
      d.count,
    );
    return read.then((r) => {
      // Held from arrival, as the park's read-ahead: behind a slow batch it may wait past minIdleMs, and a peer must not take it.
      d.custody.received(
        r.entries,
        sentAt,
        r.entries.filter((e) => e.fields !== null),
      );
      return r;
    });
  }

  private handBack(): Promise<void> {
    return this.ahead.handBack(this.d, 'hand-back of the read-ahead drain batch');
  }
}
