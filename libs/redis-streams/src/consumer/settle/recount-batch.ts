import type { StreamEntry } from '../../stream-entry.js';

/**
 * Entries whose delivery count was put back while they waited (a key queue's pause or limit, a fair queue's wait),
 * counted again as they start, with the count they were read with: one round trip for the entries that start
 * together (those asked for within a microtask), after `before` (a put-back on its way). A rejection is Redis
 * failing, or the entry no longer pending under this consumer (an operator's XCLAIM or XACK): it was not started.
 */
export class RecountBatch {
  private batch: { entries: StreamEntry[]; done: Promise<ReadonlySet<string>> } | undefined;

  constructor(
    /** Gives the entries their count back (StreamCommands.recount): the ids it did. */
    private readonly recount: (entries: readonly StreamEntry[]) => Promise<string[]>,
    private readonly before: () => Promise<void> = () => Promise.resolve(),
  ) {}

  async count(entry: StreamEntry): Promise<void> {
    let batch = this.batch;
    if (!batch) {
      const entries: StreamEntry[] = [];
      batch = this.batch = {
        entries,
        // A microtask later: every entry started in this turn is in the batch.
        done: Promise.resolve().then(async () => {
          this.batch = undefined;
          await this.before();
          return new Set(await this.recount(entries));
        }),
      };
    }
    batch.entries.push(entry);
    const ours = await batch.done;
    if (!ours.has(entry.id))
      throw new Error(`entry ${entry.id} of "${entry.stream}" is no longer pending under this consumer: it was not started`);
  }
}
