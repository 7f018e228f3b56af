import type { Subscription } from 'rxjs';
import { ConsumerLoop, type ConsumerLoopDeps } from '../consumer/consumer-loop.js';
import type { CommandLane, RetryListener } from '../redis/command-lane.js';
import { Lanes } from '../redis/lanes.js';
import { slotOf } from '../slots.js';
import type { ReaderStreams } from './plan.js';

/** One reader: the loop over the streams of one slot (all streams on one node), and its lanes. */
export interface Reader {
  lanes: Lanes;
  loop: ConsumerLoop;
  /** Resolves when the loop has finished. */
  done: Promise<void>;
  run: Subscription;
}

/** What every reader shares; `onReady` and `onError` also name the loop they come from. */
export type ReaderDeps = Omit<ConsumerLoopDeps, 'streams' | 'lanes' | 'batch' | 'onReady' | 'onError'> & {
  command: CommandLane;
  /** `<group>:<consumer>` (encoded: connection-name.ts), the connections' name. */
  name: string;
  /** Readers of this server: a lone one takes the plain name, the others their slot's. */
  readers: number;
  onLaneError: (lane: string, failure: Error) => void;
  onLaneRetry: RetryListener;
  decide: NonNullable<ConsumerLoopDeps['batch']>['decide'];
  onReady: (loop: ConsumerLoop) => void;
  onError: (error: unknown, retryInMs: number) => void;
  /** A step of the loop went through (Redis answered). */
  onStep: () => void;
};

/** Opens a reader's lanes and runs its loop. */
export function openReader({ streams, batch }: ReaderStreams, d: ReaderDeps): Reader {
  const { command, name, readers, onLaneError, onLaneRetry, decide, onReady, onStep, ...shared } = d;
  const lanes = new Lanes({
    connection: d.options.connection,
    name: readers === 1 ? name : `${name}:${slotOf(streams[0]!)}${batch ? ':batch' : ''}`,
    onError: onLaneError,
    onRetry: onLaneRetry,
    command,
    slotKey: streams[0]!,
  });
  const loop: ConsumerLoop = new ConsumerLoop({
    ...shared,
    streams,
    lanes,
    batch: batch && { ...batch, decide },
    onReady: () => onReady(loop),
  });
  let run: Subscription | undefined;
  const done = new Promise<void>((resolve) => {
    run = loop.run().subscribe({ next: onStep, complete: resolve, error: resolve });
  });
  return { lanes, loop, done, run: run! };
}
