import { EMPTY, type Observable } from 'rxjs';
import type { KeyFunction } from '../../codec/key-function.js';
import type { Logger } from '../../ports.js';
import type { KeySlotCommands } from '../../redis/settle/key-slot-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { Custody } from '../custody/custody.js';
import type { StopSignal } from '../stop-signal.js';
import type { AckPipeline } from './ack-pipeline.js';
import type { BatchProgress } from './batch-progress.js';
import type { SettleFetched } from './batch-settler.js';
import type { fairKeysOf } from './fair-keys.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';

/** A fair pattern's stream: `name` (keyPrefix + pattern) names its slots in Redis. */
export interface FairPlan {
  name: string;
  pattern: string;
  groups: { inHand: number; perKey: true | KeyFunction };
}

/** A reader's settle as the plan names it: fair groups for a fair pattern's stream, otherwise its tenure's (or the batch settler). */
export interface SettlePlan {
  /** A fair pattern's stream (one per reader): `name` is keyPrefix + pattern, its slots' name in Redis. */
  fair?: FairPlan | undefined;
}

/**
 * How a reader's fetched entries are settled, beyond the batch settler every reader has: what it
 * settles with, what it does at a (re)start and a stop, its timers, and a nudge when a pause changes.
 */
export interface SettlePolicy {
  /** The settle of what the steps fetch; undefined: the tenure's, or the batch settler's. */
  readonly settle: SettleFetched | undefined;
  /** Before every (re)start, after the tenure's: what it holds ends (running entries finish; what waits is read again). */
  readonly restart$: Observable<never>;
  /** Beside the steps, for as long as they run. */
  readonly upkeep$: Observable<unknown>;
  /** The park's COUNT for what it asks (fair groups read ahead: more, or fewer of large entries); undefined: as asked. */
  readonly readSize?: ((asked: number) => number) | undefined;
  /** A pause began or ended. */
  nudge(): void;
  /** After the last beat, before the tenure's finish: what runs finishes, what waits goes back to the group. */
  finish(): Promise<void>;
}

/** The batch settler alone: nothing of its own to do. */
export const BATCH_SETTLE: SettlePolicy = {
  settle: undefined,
  restart$: EMPTY,
  upkeep$: EMPTY,
  nudge: () => undefined,
  finish: () => Promise.resolve(),
};

export interface SettlePolicyDeps {
  decide: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  custody: Custody;
  acks: AckPipeline;
  concurrency: number;
  minIdleMs: number;
  leaseRenewMs: number;
  deserializer: Parameters<typeof fairKeysOf>[1];
  slots: KeySlotCommands;
  stop: StopSignal;
  inProgress: Set<BatchProgress>;
  barred: () => boolean;
  putBack: (entries: readonly StreamEntry[], idleMs: number) => Promise<void>;
  /** Gives entries put back the count they were read with, as they start (StreamCommands.recount): the ids it did. */
  recount: (entries: readonly StreamEntry[]) => Promise<string[]>;
  logger: Logger;
}
