import { concat, EMPTY, of, repeat, type Observable } from 'rxjs';
import { describeError } from '../../describe-error.js';
import type { Logger } from '../../ports.js';
import type { ShortAck, StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { StepResult } from '../watch/loop-vitals.js';
import type { StopSignal } from '../stop-signal.js';
import type { Tenure, TenureParts, TenureSteps } from './tenure.js';

const NEXT_BEAT = of(0);

/** A reader that may always read (every reader but an ordered pattern's): self-drain, then beats until stopped. */
export class AlwaysTenure implements Tenure {
  readonly claimsOnRead = true;
  readonly fsync = false;
  readonly settle = undefined;
  readonly onWaiting = undefined;
  readonly looksForHanded = true;
  readonly parksInARow = true;
  readonly restart$: Observable<never> = EMPTY;
  readonly upkeep$: Observable<unknown> = EMPTY;
  private parts!: TenureParts;

  constructor(
    private readonly d: {
      commands: Pick<StreamCommands, 'ackMany'>;
      stop: StopSignal;
      logger: Logger;
    },
  ) {}

  maxWaitingRetries(configured: number): number {
    return configured;
  }

  bind(parts: TenureParts): void {
    this.parts = parts;
  }

  ack(entries: readonly StreamEntry[]): Promise<ShortAck[]> {
    return this.d.commands.ackMany(entries, this.parts.offer.ackDelete);
  }

  mayTakeBack(): boolean {
    return true;
  }

  reads$({ selfDrain$, beat$ }: TenureSteps): Observable<StepResult> {
    const { stop } = this.d;
    return concat(selfDrain$, beat$.pipe(repeat({ delay: () => (stop.stopped ? EMPTY : NEXT_BEAT) })));
  }

  nudge(): void {}

  /** A read-ahead batch goes back, waiting retries become a peer's, and the last ack is confirmed (and reported). */
  async finish(): Promise<void> {
    const { stop, logger } = this.d;
    const { parker, custody, acks } = this.parts;
    await parker.handBackAhead();
    await stop
      .bounded(custody.handBackWaiting(), () => 'the hand-back of entries waiting for their retry', logger)
      .catch((err: unknown) =>
        logger.warn(`hand-back of entries waiting for their retry failed, a peer takes them after minIdleMs: ${describeError(err)}`),
      );
    await stop
      .bounded(acks.flush(), () => 'the last ack', logger)
      .catch((err: unknown) => logger.warn(`last ack failed, its entries stay pending: ${describeError(err)}`));
  }

  view(): undefined {
    return undefined;
  }
}
