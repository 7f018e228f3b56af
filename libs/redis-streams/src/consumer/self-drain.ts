import { defer, EMPTY, expand, type Observable } from 'rxjs';
import type { DrainRead } from '../redis/fetch-commands.js';
import { dropDeleted, withDeliveryCounts, withoutWaiting } from './fetched-entries.js';
import type { LoopParts } from './loop-parts.js';
import type { StepResult } from './loop-vitals.js';
import { ReadAhead } from './read-ahead.js';

/**
 * Step 1, at every (re)start: this consumer's own pending entries, oldest first (XREADGROUP …
 * 0 on the command lane), settled read by read until a read comes back empty.
 */
export function selfDrain$(p: LoopParts): Observable<StepResult> {
  return defer(() => {
    const drain = new Drain(p);
    const read$ = defer(() => drain.once());
    // What it leaves to the group is logged by the next reclaim round (or the loop's end), with a sweep's.
    return read$.pipe(expand((r) => (r.fetched > 0 && !p.stop.stopped ? read$ : EMPTY)));
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

  constructor(private readonly p: LoopParts) {
    this.next = new Map(p.d.streams.map((s) => [s, '0']));
  }

  async once(): Promise<StepResult> {
    const { p } = this;
    if (p.stop.stopped) {
      await this.handBack();
      return { step: 'drain', fetched: 0 };
    }
    const read = await (this.ahead.take() ?? this.read());
    if (!read) return { step: 'drain', fetched: 0 };
    const { entries, retriesWaiting } = read;
    for (const s of [...this.next.keys()]) {
      const last = entries.findLast((e) => e.stream === s);
      if (last) this.next.set(s, last.id);
      else this.next.delete(s);
    }
    if (this.next.size > 0 && p.d.options.readAhead) {
      const ahead = this.read();
      if (ahead) this.ahead.keep(ahead);
    }
    const live = await dropDeleted(p, entries);
    await p.settle(await withoutWaiting(p, await withDeliveryCounts(p, live, true), retriesWaiting), 'drain');
    if (p.stop.stopped) await this.handBack();
    return { step: 'drain', fetched: entries.length };
  }

  private read(): Promise<DrainRead> | undefined {
    const streams = [...this.next.keys()];
    if (streams.length === 0) return undefined;
    const { p } = this;
    const { commands, options } = p.d;
    const read = commands.fetch.drainRead(
      options.consumer,
      streams,
      streams.map((s) => this.next.get(s)!),
      p.count,
    );
    return read.then((r) => {
      // Held from arrival, as the park's read-ahead: behind a slow batch it may wait past minIdleMs, and a peer must not take it.
      p.marks.delivered(r.entries);
      p.lease.hold(r.entries.filter((e) => e.fields !== null));
      return r;
    });
  }

  private handBack(): Promise<void> {
    const { stop, lease, d } = this.p;
    return this.ahead.handBack(
      { stop, lease, minIdleMs: d.options.minIdleMs, logger: d.logger },
      'hand-back of the read-ahead drain batch',
    );
  }
}
