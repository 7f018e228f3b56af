import type { ReadAsk, ReadGate, ReadNext, ReadResult } from './read-gate.js';

/**
 * A park's COUNT as the reader's settle policy sizes it (fair groups read ahead of what runs, past one key's backlog:
 * more entries a read, fewer when they are large). Only the park's: self-drain and reclaims read `batchSize`.
 */
export class ReadSizeGate implements ReadGate {
  constructor(private readonly size: (asked: number) => number) {}

  shape(ask: ReadAsk): ReadAsk {
    const count = this.size(ask.count);
    return count === ask.count ? ask : { ...ask, count };
  }

  read(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    return next(ask);
  }
}
