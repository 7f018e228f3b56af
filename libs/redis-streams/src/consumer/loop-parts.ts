import type { ResolvedBatchOptions } from '../options/batch-options.js';
import { MAX_BATCH_SIZE, type ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { Lanes } from '../redis/lanes.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { StreamEntry } from '../stream-entry.js';
import { AckPipeline } from './ack-pipeline.js';
import type { BatchProgress } from './batch-progress.js';
import { settleBatch, type BatchSettlerDeps } from './batch-settler.js';
import { DeliveryMarks } from './delivery-marks.js';
import { Lease } from './lease.js';
import { LeftToGroupLog } from './left-to-group-log.js';
import { PendingAudit } from './pending-audit.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import type { StopSignal } from './stop-signal.js';

export interface ConsumerLoopDeps {
  /** Full stream keys this consumer reads. */
  streams: readonly string[];
  options: ResolvedServerOptions;
  commands: StreamCommands;
  lanes: Lanes;
  /** Decides one entry (`'acked'`: succeeded, to be acked); rejects only when Redis failed (the entry is then still pending). */
  settle: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  onSettled: (event: SettledEvent) => void;
  /**
   * Set for a batch handler's streams: entries go to `decide` up to `maxSize` at a time, and a
   * park that returns a batch not yet full waits up to `maxWaitMs` for more.
   */
  batch?:
    (ResolvedBatchOptions & { decide: (entries: readonly StreamEntry[], source: DeliverySource) => Promise<SettledEvent[]> }) | undefined;
  logger: Logger;
  onDeleted: (stream: string, ids: string[]) => void;
  onError: (error: unknown, retryInMs: number) => void;
  /** On a cluster MOVED/ASK are a moved slot, retried; on one node they say the URL names a cluster node. */
  onCluster?: boolean;
  /** Called once the groups exist, every time the loop (re)starts. */
  onReady: () => void;
  /**
   * Resolves once the transport has started (every reader's groups exist, `listen` answered):
   * no handler runs before, as with one reader. Default: at once.
   */
  started?: Promise<void>;
}

/** What the loop's parts tell each other: the group keeper hears of losses and short acks, and something new wakes the park. */
export interface LoopSignals {
  groupLost(stream: string): void;
  shortAck(stream: string, entries: StreamEntry[], missing: number): void;
  ackFailed(): void;
  wake(): void;
}

/** What every step of one loop shares: its deps, its stop signal, and the bookkeeping of the entries it holds. */
export interface LoopParts {
  readonly d: ConsumerLoopDeps;
  readonly stop: StopSignal;
  readonly lease: Lease;
  readonly audit: PendingAudit;
  readonly acks: AckPipeline;
  readonly marks: DeliveryMarks;
  /** The warning for waiting entries left to the group: per sweep at most, once a minute per stream unless it doubles. */
  readonly leftLog: LeftToGroupLog;
  /** Batches being settled, and how far each got (what abandon hands back). */
  readonly inProgress: Set<BatchProgress>;
  /**
   * COUNT of every read and reclaim: `batchSize`; for a batch handler, enough for `concurrency`
   * calls of `maxSize` (at most MAX_BATCH_SIZE, unless one call alone needs more).
   */
  readonly count: number;
  /** Settles one fetched batch (see settleBatch). */
  settle(entries: readonly StreamEntry[], source: DeliverySource, inHand?: number): Promise<void>;
}

export function loopParts(d: ConsumerLoopDeps, stop: StopSignal, signals: LoopSignals): LoopParts {
  const marks = new DeliveryMarks();
  const onSettled = (event: SettledEvent, confirmedAt?: number) => {
    if (stop.abandoned) return;
    const retryAt = marks.settled(event, confirmedAt);
    if (retryAt !== undefined) audit.scheduled(retryAt);
    d.onSettled(event);
  };
  const { batch, options } = d;
  const lease: Lease = new Lease(
    d.commands,
    options.consumer,
    options.leaseRenewMs,
    d.logger,
    (stream, lost) => void audit.heldLost(stream, lost),
  );
  const audit = new PendingAudit({
    commands: d.commands,
    lease,
    marks,
    consumer: options.consumer,
    minIdleMs: options.minIdleMs,
    leaseRenewMs: options.leaseRenewMs,
    logger: d.logger,
    onDeleted: d.onDeleted,
    onGroupLost: (stream) => signals.groupLost(stream),
    onDue: () => signals.wake(),
  });
  const acks = new AckPipeline(d.commands, lease, onSettled, signals.shortAck, signals.ackFailed);
  const inProgress = new Set<BatchProgress>();
  const batchDeps: BatchSettlerDeps = {
    lease,
    acks,
    settle: d.settle,
    batchHandler: batch && { maxSize: batch.maxSize, decide: batch.decide },
    onSettled,
    concurrency: options.concurrency,
    handBackIdleMs: options.minIdleMs,
    stop,
    inProgress,
    logger: d.logger,
  };
  const count = batch ? Math.max(batch.maxSize, Math.min(batch.maxSize * options.concurrency, MAX_BATCH_SIZE)) : options.batchSize;
  return {
    d,
    stop,
    lease,
    audit,
    acks,
    marks,
    leftLog: new LeftToGroupLog(d.logger, options.maxWaitingRetries, options.minIdleMs),
    inProgress,
    count,
    settle: (entries, source, inHand = 0) => settleBatch(batchDeps, entries, source, inHand),
  };
}
