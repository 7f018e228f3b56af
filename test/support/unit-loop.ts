/**
 * The parts of one consumer loop (lease, marks, audit, acks, settle), built without Nest and
 * without a ConsumerLoop, on a real Redis: for the unit tests of the steps (park with read-ahead,
 * self-drain, reclaim rounds). The handler is the test's (`handle`); every other decision is
 * Redis'. The one place that knows how the steps are wired: a refactor that moves them into a
 * reader changes this file, not the specs.
 */
import { randomUUID } from 'node:crypto';
import { loopParts, type ConsumerLoopDeps, type LoopParts } from '../../libs/redis-streams/src/consumer/loop-parts.js';
import type { DeliverySource, SettledEvent, SettleOutcome } from '../../libs/redis-streams/src/consumer/settled-event.js';
import { StopSignal } from '../../libs/redis-streams/src/consumer/stop-signal.js';
import { resolveServerOptions, type RedisStreamsServerOptions } from '../../libs/redis-streams/src/options/server-options.js';
import { Lanes } from '../../libs/redis-streams/src/redis/lanes.js';
import { StreamCommands } from '../../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../../libs/redis-streams/src/stream-entry.js';
import type { TestRedis } from './redis-server.js';

/** What the test's handler decides for one entry (or, for a batch handler, for each of its call's entries). */
export type Handle = (entry: StreamEntry, source: DeliverySource) => Promise<SettleOutcome> | SettleOutcome;

export interface UnitLoop {
  parts: LoopParts;
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
}

export interface UnitLoopOptions {
  streams: string[];
  options?: RedisStreamsServerOptions;
  handle?: Handle;
  /** A batch handler's reader: entries go to the handler `maxSize` at a time (each still decided by `handle`). */
  batch?: { maxSize: number; maxWaitMs: number };
}

/** A promise the test opens itself: `gate.wait` until `gate.open()`. */
export function gate() {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
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
      loop.parts.lease.stop();
      loop.parts.audit.stop();
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

function unitLoop(redis: TestRedis, { streams, options: input = {}, handle = () => 'acked', batch }: UnitLoopOptions): UnitLoop {
  const options = resolveServerOptions({ connection: redis.url, group: 'g', consumer: 'c', telemetry: false, ...input });
  const calls: string[] = [];
  const settled: SettledEvent[] = [];
  const deleted: [string, string[]][] = [];
  const warnings: string[] = [];
  const logger = { log: () => {}, warn: (m: string) => void warnings.push(m), error: (m: string) => void warnings.push(m) };
  const name = `unit:${randomUUID().slice(0, 8)}`;
  const lanes = new Lanes({ connection: options.connection, name, onError: () => {} });
  const decide = async (entry: StreamEntry, source: DeliverySource): Promise<SettledEvent> => {
    calls.push(`${entry.id} ${source}`);
    const outcome = await handle(entry, source);
    return { stream: entry.stream, id: entry.id, outcome, deliveryCount: entry.deliveryCount, source };
  };
  const d: ConsumerLoopDeps = {
    streams,
    options,
    commands: new StreamCommands(lanes.command, options.group),
    lanes,
    settle: decide,
    batch: batch && {
      ...batch,
      decide: (entries, source) => Promise.all(entries.map((e) => decide(e, source))),
    },
    onSettled: (event) => void settled.push(event),
    logger,
    onDeleted: (stream, ids) => void deleted.push([stream, ids]),
    onError: () => {},
    onReady: () => {},
  };
  const stop = new StopSignal();
  const parts = loopParts(d, stop, { groupLost: () => {}, shortAck: () => {}, ackFailed: () => {}, wake: () => {} });
  return { parts, stop, lanes, name, calls, settled, deleted, warnings };
}

/** `n` entries `n <i>` added to `key`; their ids. */
export async function addEntries(r: ReturnType<TestRedis['client']>, key: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  return ids;
}
