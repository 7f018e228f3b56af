import type { Logger } from '../../ports.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { Custody } from '../custody/custody.js';
import type { StopSignal } from '../stop-signal.js';

/** What handing a read-ahead back needs: the stop signal (for its bound), the custody, the idle to set. */
export interface HandBackDeps {
  stop: StopSignal;
  custody: Pick<Custody, 'handBack'>;
  minIdleMs: number;
  logger: Logger;
}

/**
 * A read sent before its turn (`readAhead`: Redis serves it while the batch before it is handled),
 * for self-drain and the park alike. It is the next step's to take; until then its failure is not
 * unhandled (the step that takes it reports it). Stopping hands its entries back to the group at
 * once: none of them was started.
 */
export class ReadAhead<R> {
  private read: Promise<R> | undefined;

  constructor(
    /** The entries a result holds (deleted ones, without fields, are not handed back). */
    private readonly entriesOf: (result: R) => readonly StreamEntry[],
  ) {}

  /** A read is out. */
  get out(): boolean {
    return this.read !== undefined;
  }

  keep(read: Promise<R>): void {
    read.catch(() => undefined);
    this.read = read;
  }

  /** The read, if one is out; it is the caller's from now on. */
  take(): Promise<R> | undefined {
    const read = this.read;
    this.read = undefined;
    return read;
  }

  /**
   * Stopping: the read, when it comes, goes back to the group (idle set to `minIdleMs`, so the next
   * peer's beat takes it). Both the read and the hand-back are bounded by the stop (a frozen server).
   * Not after an abandon, which handed back what the lease held already.
   */
  async handBack({ stop, custody, minIdleMs, logger }: HandBackDeps, what: string): Promise<void> {
    const read = this.take();
    if (!read || stop.abandoned) return;
    const handedBack = read
      .then((result) => this.entriesOf(result).filter((e) => e.fields !== null))
      .catch(() => [])
      .then((entries) => (entries.length > 0 ? custody.handBack(entries, minIdleMs) : undefined));
    await stop.bounded(handedBack, () => what, logger);
  }
}
