import type { Observable } from 'rxjs';
import type { ShortAck } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { AckPipeline } from '../settle/ack-pipeline.js';
import type { BatchProgress } from '../settle/batch-progress.js';
import type { SettleFetched } from '../settle/batch-settler.js';
import type { Custody } from '../custody/custody.js';
import type { StepResult } from '../watch/loop-vitals.js';
import type { Parker } from '../read/parker.js';
import type { PauseWatch } from '../intake/pause-watch.js';
import type { DeliverySource, SettledEvent } from '../settle/settled-event.js';
import type { ServerOffer } from '../read/server-offer.js';
import type { OrderingView } from './ordering-view.js';

/** What a tenure shows health, inspect and the dashboard (today only the partition tenure has a view). */
export type TenureView = OrderingView;

/** The reader's steps as a tenure runs them: the groups, self-drain, and one beat (check, reclaim, park). */
export interface TenureSteps {
  groups$: Observable<StepResult>;
  selfDrain$: Observable<StepResult>;
  beat$: Observable<StepResult>;
}

/** The reader's parts a tenure works with, once they are built (the tenure is built before them: they ask it things). */
export interface TenureParts {
  custody: Custody;
  acks: AckPipeline;
  /** Decides one entry (the reader's decider). */
  decideOne: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  inProgress: Set<BatchProgress>;
  pause: PauseWatch;
  parker: Parker;
  offer: ServerOffer;
}

/**
 * When a reader may read, and how its acks go (the plan's tenure policy): always (every reader but an
 * ordered one's), or while this consumer owns the stream's partition (PartitionTenure: standby,
 * takeover, fenced acks, release). The Reader runs `reads$` around its steps and asks the tenure what
 * differs; it tests no mode of its own.
 */
export interface Tenure {
  /** XREADGROUP … CLAIM may serve this reader (it reads the most idle first: never an ordered stream). */
  readonly claimsOnRead: boolean;
  /** Its acks wait for an fsync (WAITAOF): the server offer checks it can. */
  readonly fsync: boolean;
  /** Failed entries it may hold waiting for their retry before it stops reading. */
  maxWaitingRetries(configured: number): number;
  /** The parts it works with, once the reader built them; before the loop runs. */
  bind(parts: TenureParts): void;
  /** The settle of what the steps fetch; undefined: the batch settler's. */
  readonly settle: SettleFetched | undefined;
  /** A failed entry waits here for its retry: what it holds back meanwhile. */
  readonly onWaiting: ((entry: StreamEntry) => void) | undefined;
  /** XACK of settled entries. */
  ack(entries: readonly StreamEntry[]): Promise<ShortAck[]>;
  /** Whether the audit may take back an entry it finds pending here unknown (a former owner takes nothing back). */
  mayTakeBack(): boolean;
  /** Whether entries handed to this consumer by others are looked for (see HandedEntries). */
  readonly looksForHanded: boolean;
  /**
   * Whether a beat with nothing but a park to do may park again at once, without going back to the tenure
   * between parks (see Parker.parks$): true when the tenure checks nothing between beats.
   */
  readonly parksInARow: boolean;
  /** Before the groups step, at every (re)start. */
  restart$: Observable<never>;
  /** The reads of one run of the loop, from its groups step until it stops (or fails). */
  reads$(steps: TenureSteps): Observable<StepResult>;
  /** Beside the steps, for as long as they run. */
  readonly upkeep$: Observable<unknown>;
  /** Something it waits on may have changed (a pause, a resume, what the acks or the audit found). */
  nudge(): void;
  /** After the last beat: what is in hand ends its way (handed back, acked, the partition left). */
  finish(): Promise<void>;
  /** What health and inspect show of its partition; undefined for a reader that owns none. */
  view(): TenureView | undefined;
}
