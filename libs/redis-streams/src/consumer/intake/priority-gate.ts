import type { StreamEntry } from '../../stream-entry.js';
import type { ReadAsk, ReadGate, ReadNext, ReadResult } from './read-gate.js';

/**
 * A pattern with priorities (`priorities`): its levels are streams, and a park reads them one at a time without
 * BLOCK, the highest first, each for what the ones before left of the COUNT; nothing at any level: one read of
 * them all parks, and whichever level gets an entry first answers. The guard against starvation: every
 * `lowerEvery`-th read leads with a level below the top (those levels taking turns), then reads the rest from
 * the top down. So under a steady load of the top level, each level below it leads at least one read in every
 * `lowerEvery × (levels − 1)`.
 */
export class PriorityGate implements ReadGate {
  private reads = 0;
  private guards = 0;

  constructor(private readonly d: { highestFirst: readonly string[]; lowerEvery: number }) {}

  async read(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    const order = this.order(ask.streams);
    const entries: StreamEntry[] = [];
    let inHand = false;
    for (const stream of order) {
      const want = ask.count - entries.length;
      if (want <= 0) break;
      const got = await next({ ...ask, streams: [stream], blockMs: 0, count: want });
      entries.push(...got.entries);
      inHand ||= got.inHand === true;
    }
    if (entries.length > 0 || ask.blockMs === 0) return inHand ? { entries, inHand } : { entries };
    // Nothing at any level: park on them all.
    return next(ask);
  }

  /** The levels this read may take (a pause may have left some out), in the order this read takes them. */
  private order(streams: readonly string[]): string[] {
    const levels = this.d.highestFirst.filter((s) => streams.includes(s));
    if (levels.length < 2 || ++this.reads % this.d.lowerEvery !== 0) return levels;
    const lead = levels[1 + (this.guards++ % (levels.length - 1))]!;
    return [lead, ...levels.filter((s) => s !== lead)];
  }
}
