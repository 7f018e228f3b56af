/**
 * The parts of one reader (custody, acks, findings, the settle of a fetched batch) and its steps
 * (park, reclaim, self-drain), built without Nest and without a Reader, on a real Redis: for the
 * unit tests of the steps. Each step gets only the narrow deps it declares. The handler is the
 * test's (`handle`); every other decision is Redis'. The one place that knows how the steps are
 * wired besides the Reader: a refactor that moves them changes this file, not the specs.
 */
import { randomUUID } from 'node:crypto';
import { NEVER, type Observable } from 'rxjs';
import { AckPipeline } from '../../libs/redis-streams/src/consumer/settle/ack-pipeline.js';
import type { BatchProgress } from '../../libs/redis-streams/src/consumer/settle/batch-progress.js';
import { settleBatch, type SettleFetched } from '../../libs/redis-streams/src/consumer/settle/batch-settler.js';
import { Custody } from '../../libs/redis-streams/src/consumer/custody/custody.js';
import { LoopFindings } from '../../libs/redis-streams/src/consumer/watch/loop-findings.js';
import type { StepResult } from '../../libs/redis-streams/src/consumer/watch/loop-vitals.js';
import { ClaimGate } from '../../libs/redis-streams/src/consumer/intake/claim-gate.js';
import { Parker } from '../../libs/redis-streams/src/consumer/read/parker.js';
import { Reclaimer } from '../../libs/redis-streams/src/consumer/read/reclaimer.js';
import { selfDrain$ } from '../../libs/redis-streams/src/consumer/read/self-drain.js';
import type { DeliverySource, SettledEvent, SettleOutcome } from '../../libs/redis-streams/src/consumer/settle/settled-event.js';
import { StopSignal } from '../../libs/redis-streams/src/consumer/stop-signal.js';
import {
  MAX_BATCH_SIZE,
  resolveServerOptions,
  type RedisStreamsServerOptions,
} from '../../libs/redis-streams/src/options/server-options.js';
import { Lanes } from '../../libs/redis-streams/src/redis/connection/lanes.js';
import { StreamCommands } from '../../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../../libs/redis-streams/src/stream-entry.js';
import type { TestRedis } from './redis-server.js';

/** What the test's handler decides for one entry (or, for a batch handler, for each of its call's entries). */
export type Handle = (entry: StreamEntry, source: DeliverySource) => Promise<SettleOutcome> | SettleOutcome;

export interface UnitLoop {
  custody: Custody;
  acks: AckPipeline;
  stop: StopSignal;
  lanes: Lanes;
  /** The lanes' connection name: `<name>:blocking` is the one that parks. */
  name: string;
  /** Every handler call, in order: `<id> <source>`. */
  calls: string[];
  /** What the parts reported settled (acks confirmed, failures). */
  settled: SettledEvent[];
  deleted: [stream: string, ids: string[]][];
  warnings: string[];
  /** The park step (reclaim sweep never busy). */
  parker(): Parker;
  reclaimer(): Reclaimer;
  selfDrain$(): Observable<StepResult>;
}

export interface UnitLoopOptions {
  streams: string[];
  options?: RedisStreamsServerOptions;
  handle?: Handle;
  /** A batch handler's reader: entries go to the handler `maxSize` at a time (each still decided by `handle`). */
  batch?: { maxSize: number; maxWaitMs: number };
  /** The park's read claims idle entries (XREADGROUP … CLAIM, Redis 8.4+). Default: false, the path every server takes. */
  claimOnRead?: boolean;
}

/**
 * `const loops = useUnitLoops(redis)` at the top of a file; `await loops.open({ streams, … })` in a
 * test. Group `g`, consumer `c` unless the options say otherwise. Everything opened is stopped and
 * closed after each test.
 */
export function useUnitLoops(redis: TestRedis) {
  const open: UnitLoop[] = [];
  afterEach(async () => {
    for (const loop of open.splice(0)) {
      loop.stop.stop('abandoned');
      await loop.lanes.close();
    }
  });
  return {
    open: (o: UnitLoopOptions): UnitLoop => {
      const loop = unitLoop(redis, o);
      open.push(loop);
      return loop;
    },
  };
}

function unitLoop(
  redis: TestRedis,
  { streams, options: input = {}, handle = () => 'acked', batch, claimOnRead = false }: UnitLoopOptions,
): UnitLoop {
  const options = resolveServerOptions({ connection: redis.url, group: 'g', consumer: 'c', telemetry: false, ...input });
  const calls: string[] = [];
  const settled: SettledEvent[] = [];
  const deleted: [string, string[]][] = [];
  const warnings: string[] = [];
  const logger = { log: () => {}, warn: (m: string) => void warnings.push(m), error: (m: string) => void warnings.push(m) };
  const name = `unit:${randomUUID().slice(0, 8)}`;
  const lanes = new Lanes({ connection: options.connection, name, onError: () => {} });
  const commands = new StreamCommands(lanes.command, options.group);
  const decide = async (entry: StreamEntry, source: DeliverySource): Promise<SettledEvent> => {
    calls.push(`${entry.id} ${source}`);
    const outcome = await handle(entry, source);
    return { stream: entry.stream, id: entry.id, outcome, deliveryCount: entry.deliveryCount, source };
  };
  const stop = new StopSignal();
  const findings = new LoopFindings();
  const { consumer, minIdleMs, maxWaitingRetries } = options;
  const custody = new Custody({
    commands,
    consumer,
    minIdleMs,
    leaseRenewMs: options.leaseRenewMs,
    maxWaitingRetries,
    logger,
    stop,
    findings,
    onDeleted: (stream, ids) => void deleted.push([stream, ids]),
    onSettled: (event) => void settled.push(event),
    handedLookable: () => streams,
    mayTakeBack: () => true,
    // No connections' report here: a check's failure is the audit's own line.
    connection: { failed: () => false, silent: () => false, answered: () => undefined },
  });
  const acks = new AckPipeline((entries) => commands.ackMany(entries), custody, findings);
  const inProgress = new Set<BatchProgress>();
  const settle: SettleFetched = (entries, source, inHand = 0) =>
    settleBatch(
      {
        custody,
        acks,
        decide: decide,
        batchHandler: batch && { maxSize: batch.maxSize, decide: (chunk, from) => Promise.all(chunk.map((e) => decide(e, from))) },
        concurrency: options.concurrency,
        handBackIdleMs: minIdleMs,
        stop,
        inProgress,
        logger,
      },
      entries,
      source,
      inHand,
    );
  // As the Reader's: enough for `concurrency` calls of a batch handler, at most MAX_BATCH_SIZE.
  const count = batch ? Math.max(batch.maxSize, Math.min(batch.maxSize * options.concurrency, MAX_BATCH_SIZE)) : options.batchSize;
  // Nothing paused: these steps' own tests (pausing is test/pause.e2e's).
  const pause = { readable: () => streams, has: () => false, changed$: NEVER };
  const step = { stop, streams, count, settle, logger, consumer, minIdleMs, pause };
  const arrivals = { commands, custody, maxWaitingRetries };
  const offer = { claimsOnRead: () => claimOnRead };
  return {
    custody,
    acks,
    stop,
    lanes,
    name,
    calls,
    settled,
    deleted,
    warnings,
    parker: () =>
      new Parker({
        ...step,
        ...arrivals,
        blockMs: options.blockMs,
        readAhead: options.readAhead,
        // The read's CLAIM alone (when asked for): pausing and rate limits have tests of their own.
        gates: [new ClaimGate({ offer, minIdleMs, custody })],
        lanes,
        fetch: commands.fetch,
        custody,
        batch,
      }),
    reclaimer: () => new Reclaimer({ ...step, ...arrivals, blockMs: options.blockMs, leaseRenewMs: options.leaseRenewMs, offer }),
    selfDrain$: () => selfDrain$({ ...step, ...arrivals, readAhead: options.readAhead }),
  };
}

/** `n` entries `n <i>` added to `key`; their ids. */
export async function addEntries(r: ReturnType<TestRedis['client']>, key: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  return ids;
}
