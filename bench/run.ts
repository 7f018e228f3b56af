// npm run bench [-- --smoke] [-- --only cluster|telemetry|drain|retries|scale|bullmq|reclaim|ordered|flow]: every system on the same throwaway redis-server, in one run,
// reported as ratios to the better of two hand-written expert ioredis loops measured in that same run; then the
// Redis Cluster section (bench/cluster.ts) on a throwaway local cluster. `--only cluster` runs that section alone
// and replaces it in the existing results file, keeping the rest. `--only telemetry` runs the OpenTelemetry cost
// section alone (results/telemetry.md). `--only drain` runs the drain section alone and prints its ratios, writing
// no results file (for before/after comparisons of a change) but prints its table in markdown. The drain section
// (alone or in the full run) also counts each system's instructions per entry (bench/instructions.ts: callgrind or
// perf; `--no-instructions` leaves that out, `--instructions-dir <dir>` keeps the counter's files). `--only retries` runs the retry section alone
// (bench/retries.ts: results/retries.md). `--only scale` runs the scale section alone (bench/scale.ts: results/scale.md:
// reclaim beside new work, N streams on one reader, self-drain against fresh drain). `--only bullmq` runs the drain
// against BullMQ at concurrency 1, 8 and 32 alone (bench/bullmq.ts: results/bullmq.md). `--only reclaim` runs the reclaim-path section
// alone (bench/reclaim-path.ts: results/reclaim-path.md: reclaim latency and Redis CPU per beat at N streams, Redis 7.0's
// XAUTOCLAIM sweep beside Redis 8.6's, with and without XREADGROUP … CLAIM; servers of its own, `redis-server` and
// `redis8-server`). `--only ordered` runs the ordered-pattern section alone (bench/ordered.ts, its workers
// bench/ordered-child.ts: results/ordered.md: drain of ordered against unordered, 1 to 100,000 keys, 1 and 4
// worker processes, no-op and 1 ms handlers, as ratios measured in the same run). `--only durability` runs the durable
// settings' section alone (bench/durability.ts: results/durability.md: produce and the ordered drain with each durable
// setting against the default, on a master and replica of its own). `--smoke` runs everything at sizes too small to measure anything: it checks
// that every system completes and the report is written (and fails otherwise); its runs go a few at a time.
import { Logger } from '@nestjs/common';
import { Queue } from 'bullmq';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis } from '../test/support/redis-server.js';
import { waitFor } from '../test/support/wait-for.js';
import { traceparentOf, type OtelSampler } from './otel-sdk.js';
import { shutdownRedis } from './shutdown-redis.js';
import { benchBullmq, bullmqMarkdown } from './bullmq.js';
import { benchCluster, CLUSTER_HEADING, clusterMarkdown, type ClusterSection } from './cluster.js';
import { tryOtherTransports } from './other-transports.js';
import { benchRetries, type RetrySection } from './retries.js';
import { retriesMarkdown, retriesProblems } from './retries-report.js';
import { benchScale, scaleMarkdown, type ScaleSection } from './scale.js';
import { benchReclaimPath, reclaimPathMarkdown, type ReclaimPathSection } from './reclaim-path.js';
import { benchOrdered, orderedMarkdown, type OrderedSection } from './ordered.js';
import { benchFlow, flowMarkdown, type FlowSection } from './flow.js';
import { benchFair, fairMarkdown, type FairSection } from './fair.js';
import { benchDurability, durabilityMarkdown, type DurabilitySection } from './durability.js';
import { benchSchedules, schedulesMarkdown, type SchedulesSection } from './schedules.js';
import type { ProducerArgs, ProducerSummary } from './producer.js';
import { EXPERT_LOOPS, readsStream, type ExpertLoop, type SystemName } from './systems.js';
import { countInstructions, instructionsMethod, leanerLoop, notCounted, profileMarkdown, type InstructionSection } from './instructions.js';

// Nest's ClientRedis logs its connections on stdout, which carries the table.
Logger.overrideLogger(['error']);
const { values: flags } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    only: { type: 'string' },
    'no-instructions': { type: 'boolean', default: false },
    'instructions-dir': { type: 'string' },
    // Where the counted instructions go, by kind of work and function (callgrind only; bench/instruction-profile.ts).
    'instructions-profile': { type: 'boolean', default: false },
  },
});
const smoke = flags.smoke;
if (
  flags.only !== undefined &&
  ![
    'cluster',
    'telemetry',
    'drain',
    'retries',
    'scale',
    'bullmq',
    'reclaim',
    'ordered',
    'flow',
    'fair',
    'durability',
    'schedules',
  ].includes(flags.only)
)
  throw new Error(
    `bench: --only takes "cluster", "telemetry", "drain", "retries", "scale", "bullmq", "reclaim", "ordered", "flow", "fair", "durability" or "schedules", got ${JSON.stringify(flags.only)}`,
  );
const SIZE = {
  // 200,000: the size issue 52's figures were measured at (a longer drain weighs the first compilations less, as a worker's life does).
  drain: smoke ? 500 : 200_000,
  drainRounds: smoke ? 1 : 5,
  /** The warm drain: this many entries after a warm-up of `drain` entries in the same process, so many rounds. */
  warmDrain: smoke ? 500 : 200_000,
  warmRounds: smoke ? 1 : 3,
  profile: smoke ? 300 : 20_000,
  scaling: smoke ? 100 : 3_000,
  /** Fixed-rate rows: `offeredRate` msgs/s for `fixedSeconds`. */
  offeredRate: 1_000,
  fixedSeconds: smoke ? 1 : 4,
  /** Full-speed rows: this many entries, written as fast as the producer can. */
  fullSpeed: smoke ? 1_000 : 100_000,
  steadyRounds: smoke ? 1 : 3,
  recovery: smoke ? 100 : 1_000,
};
const BATCH = 100;
const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));
const OTEL_CALLS = fileURLToPath(new URL('./otel-calls.js', import.meta.url));
const PRODUCER = fileURLToPath(new URL('./producer.js', import.meta.url));
const HIDE_OTEL = fileURLToPath(new URL('./hide-otel-api.mjs', pathToBench()));
const SMOKE_NOTE =
  'SMOKE RUN: sizes far too small to measure anything; no figure or ratio here is a measurement. It only checks that every system completes and that the report is written.';

// Seconds since the start on every line: which section costs what shows in any run's output.
const log = (line: string) => process.stderr.write(`bench: [${(performance.now() / 1000).toFixed(1)} s] ${line}\n`);
if (flags.only === 'cluster') {
  log(`Redis Cluster section only; ${smoke ? 'SMOKE sizes' : 'full sizes'}`);
  const cluster = await benchCluster({ smoke, batchSize: BATCH, log });
  const markdown = clusterMarkdown(cluster);
  process.stdout.write(markdown + '\n');
  replaceClusterSection(cluster, markdown);
  process.exit(0);
}
if (flags.only === 'reclaim') {
  // Servers of its own (two binaries): none of the run's.
  const { problems } = writeReclaimPath(await benchReclaimPath({ smoke, log }));
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
const redis = await startRedis();
const admin = new Redis(redis.url);
const children = new Set<ChildProcess>();
let redisStopped = false;
process.on('exit', () => {
  children.forEach((c) => c.kill('SIGKILL'));
  // A run that failed midway must not leave its redis-server behind.
  if (!redisStopped) shutdownRedis(redis.port);
});

interface Drain {
  msgsPerSec: number;
  cpuUsPerEntry: number;
  peakRssMb: number;
  /** Every run's msgs/s, in round order. */
  runs: number[];
}
interface Row {
  system: string;
  drain?: Drain;
  /** The drain once warm: the entries after a cold drain's worth in the same process (see the warm rounds). */
  warm?: Omit<Drain, 'peakRssMb'>;
  /** Instructions per entry of the drain (bench/instructions.ts): the repeats' median, each repeat's figure and full GCs. */
  instructions?: { perEntry: number; runs: number[]; majorGcs: number[] };
  costs?: { roundTripsPer1k: number; commandsPer1k: number; bytesPerEntry?: number };
  /** Medians over the steady rounds (4 consumers: one run). */
  fixed1?: Latency;
  full1?: Latency;
  full4?: Latency;
  recoveryMs?: number;
  selfDrainMs?: number;
  shutdownParkedMs?: number;
  shutdownBusyMs?: number;
}
interface Latency {
  msgsPerSec: number;
  /** The producer's own rate (first burst written → last confirmed). */
  producerMsgsPerSec: number;
  /** Entries written but not yet delivered (stream: the group's lag; BullMQ: waiting jobs) when the producer finished. */
  backlogAtProducerEnd: number | undefined;
  /** The largest of the consumers' peak RSS. */
  peakRssMb: number;
  p50: number;
  p99: number;
  delivered: number;
  sent: number;
  /** Every run's msgs/s, in round order. */
  runs: number[];
}

const rows = new Map<SystemName, Row>([
  ['expert-pipelined', { system: 'expert ioredis loop: XACK pipelined with the next XREADGROUP' }],
  ['expert-readahead', { system: 'expert ioredis loop: next XREADGROUP in flight while handling' }],
  ['nestjs-redis-streams', { system: 'nestjs-redis-streams' }],
  ['nestjs-redis-streams-batch', { system: 'nestjs-redis-streams, batch handler (one call per batch)' }],
  ['stream-consumer', { system: 'nestjs-redis-streams/core StreamConsumer (plain Node, no Nest)' }],
  ['stream-consumer-batch', { system: 'nestjs-redis-streams/core StreamConsumer, batch handler (100)' }],
  ['bullmq', { system: 'BullMQ Worker' }],
  ['nest-redis-pubsub', { system: 'Nest Transport.REDIS (pub/sub, fire-and-forget)' }],
  ['naive-ioredis', { system: 'naive ioredis loop: awaits each XACK (the old yardstick)' }],
]);
const row = (s: SystemName) => rows.get(s)!;
/** The better expert loop on a measure, by its median in this run: the reference of that measure. */
const better = (measure: (r: Row) => number | undefined): { system: ExpertLoop; value: number } => {
  const [system] = [...EXPERT_LOOPS].sort((a, b) => (measure(row(b)) ?? 0) - (measure(row(a)) ?? 0));
  return { system: system!, value: measure(row(system!)) ?? NaN };
};
/** Round `round`'s order: the list rotated by `round`, so that no system always gets the first (or last) slot. */
const rotate = <T>(list: readonly T[], round: number): T[] => [...list.slice(round % list.length), ...list.slice(0, round % list.length)];
let uniq = 0;
// BullMQ refuses ':' in queue names.
const fresh = (what: string) => `bench-${what}-${++uniq}`;
/** A smoke run's runs go this many at a time: it measures nothing, only that each completes. */
const SMOKE_LANES = 3;
/**
 * Runs `run` for each item: one after another when measuring (each run has the machine to itself),
 * `SMOKE_LANES` at once in a smoke run.
 */
async function inTurn<T>(items: readonly T[], run: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) await run(items[i]!, i);
  };
  await Promise.all(Array.from({ length: smoke ? SMOKE_LANES : 1 }, lane));
}

// ---------------------------------------------------------------------------------------------
log(`redis-server ${redis.url}; ${smoke ? `SMOKE sizes. ${SMOKE_NOTE}` : 'full sizes'}`);
if (flags.only === 'telemetry') {
  const markdown = telemetryMarkdown(await telemetryCost());
  process.stdout.write(markdown + '\n');
  writeFileSync(new URL(`./results/telemetry${smoke ? '-smoke' : ''}.md`, pathToBench()), `${markdown}\n`);
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  process.exit(0);
}
if (flags.only === 'retries') {
  const problems = retriesProblems(writeRetries(await benchRetries({ smoke, url: redis.url, log })));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'scale') {
  const { problems } = writeScale(await benchScale({ smoke, url: redis.url, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'fair') {
  const { problems } = writeFair(await benchFair({ smoke, url: redis.url, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'flow') {
  const { problems } = writeFlow(await benchFlow({ smoke, url: redis.url, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'schedules') {
  const { problems } = writeSchedules(await benchSchedules({ smoke, url: redis.url, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'durability') {
  const { problems } = writeDurability(await benchDurability({ smoke, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
if (flags.only === 'ordered') {
  const { problems } = writeOrdered(await benchOrdered({ smoke, url: redis.url, log }));
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  if (problems.length > 0) log(`FAILED: ${problems.join('; ')}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
const startedAt = performance.now();
// Network-bound (npm lookups): a smoke run does them beside the drain section instead of after it.
const earlyOtherTransports = smoke && flags.only === undefined ? tryOtherTransports(log) : undefined;

/** The drain against BullMQ at concurrency 1, 8 and 32 (bench/bullmq.ts), written to results/bullmq(-smoke).md. */
async function bullmqSection(): Promise<void> {
  log('drain against BullMQ at concurrency 1, 8 and 32');
  const markdown = bullmqMarkdown(await benchBullmq({ smoke, batchSize: BATCH, log, fresh, preload, cleanup, child }));
  writeFileSync(new URL(`./results/bullmq${smoke ? '-smoke' : ''}.md`, pathToBench()), `${markdown}\n`);
  process.stdout.write(`${markdown}\n`);
}
if (flags.only === 'bullmq') {
  await bullmqSection();
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  process.exit(0);
}

// Every system drains the same backlog size, DRAIN_ROUNDS times, taking turns (a different one first each
// round), and each reports its median: on a shared 2-core machine one run can be 30% off either way.
log('drain');
const DRAIN_SYSTEMS: SystemName[] = [
  'expert-pipelined',
  'expert-readahead',
  'nestjs-redis-streams',
  'nestjs-redis-streams-batch',
  'stream-consumer',
  'stream-consumer-batch',
  // `--only drain` compares this transport with the expert loops: BullMQ's drain alone would take most of its time.
  ...(flags.only === 'drain' ? [] : (['bullmq', 'naive-ioredis'] as const)),
];
const drainRuns = new Map<SystemName, { msgsPerSec: number; cpuUsPerEntry: number; peakRssMb: number }[]>();
for (let round = 0; round < SIZE.drainRounds; round++) {
  await inTurn(rotate(DRAIN_SYSTEMS, round), async (system) => {
    const key = fresh('drain');
    await preload(system, key, SIZE.drain);
    const result = await child({ mode: 'drain', system, key, n: SIZE.drain, batchSize: BATCH, concurrency: 1 });
    drainRuns.set(system, [...(drainRuns.get(system) ?? []), result]);
    log(`  round ${round + 1} ${system}: ${Math.round(result.msgsPerSec)} msgs/s, ${result.cpuUsPerEntry.toFixed(1)} µs CPU per entry`);
    await cleanup(system, key);
  });
}
for (const [system, runs] of drainRuns) {
  row(system).drain = {
    msgsPerSec: median(runs.map((r) => r.msgsPerSec)),
    cpuUsPerEntry: median(runs.map((r) => r.cpuUsPerEntry)),
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb)),
    runs: runs.map((r) => Math.round(r.msgsPerSec)),
  };
}
// The same systems once warm: each drains a cold drain's worth of entries first, then `warmDrain` more, timed alone.
// A cold drain of 200,000 entries is mostly V8 compiling and optimizing the consumer's code (a larger code path
// compiles longer); the warm figure is what a worker that has been running for a while costs per entry.
const WARM_SYSTEMS = DRAIN_SYSTEMS.filter((s) => s !== 'bullmq' && s !== 'naive-ioredis');
const warmRuns = new Map<SystemName, { msgsPerSec: number; cpuUsPerEntry: number }[]>();
for (let round = 0; round < SIZE.warmRounds; round++) {
  await inTurn(rotate(WARM_SYSTEMS, round), async (system) => {
    const key = fresh('warm');
    const n = SIZE.drain + SIZE.warmDrain;
    await preload(system, key, n);
    const { warm } = await child({ mode: 'drain', system, key, n, warmFrom: SIZE.drain + 1, batchSize: BATCH, concurrency: 1 });
    warmRuns.set(system, [...(warmRuns.get(system) ?? []), warm]);
    log(`  warm round ${round + 1} ${system}: ${Math.round(warm.msgsPerSec)} msgs/s, ${warm.cpuUsPerEntry.toFixed(1)} µs CPU per entry`);
    await cleanup(system, key);
  });
}
for (const [system, runs] of warmRuns) {
  row(system).warm = {
    msgsPerSec: median(runs.map((r) => r.msgsPerSec)),
    cpuUsPerEntry: median(runs.map((r) => r.cpuUsPerEntry)),
    runs: runs.map((r) => Math.round(r.msgsPerSec)),
  };
}
// Instructions per entry after the rates, never beside them: the counted children load both cores.
const INSTRUCTION_SYSTEMS = DRAIN_SYSTEMS.filter((s) => s !== 'bullmq' && s !== 'naive-ioredis');
const instructions: InstructionSection = flags['no-instructions']
  ? notCounted('left out: --no-instructions')
  : await countInstructions({
      systems: INSTRUCTION_SYSTEMS,
      smoke,
      log,
      ...(flags['instructions-dir'] === undefined ? {} : { keepIn: flags['instructions-dir'] }),
      profile: flags['instructions-profile'],
      drain: async (system, { wrap, nodeFlags, childArgs }) => {
        const key = fresh('instructions');
        await preload(system, key, childArgs.n);
        const report = await child({ mode: 'drain', system, key, batchSize: BATCH, concurrency: 1, ...childArgs }, { wrap, nodeFlags });
        await cleanup(system, key);
        return report;
      },
    });
for (const { system, perEntry, runs, majorGcs } of instructions.systems) row(system).instructions = { perEntry, runs, majorGcs };
if (flags.only === 'drain') {
  const ref = better((r) => r.drain?.msgsPerSec);
  const warmRef = better((r) => r.warm?.msgsPerSec);
  const leaner = leanerLoop(instructions, EXPERT_LOOPS);
  // One line per system, then the same in a table to paste into a note.
  for (const system of DRAIN_SYSTEMS) {
    const { msgsPerSec, runs, cpuUsPerEntry } = row(system).drain!;
    const warm = row(system).warm;
    const counted = row(system).instructions;
    process.stdout.write(
      `drain ${system}: ${Math.round(msgsPerSec)} msgs/s, ${(msgsPerSec / ref.value).toFixed(2)}× ref, ${cpuUsPerEntry.toFixed(1)} µs CPU / entry${warm ? `; warm ${Math.round(warm.msgsPerSec)} msgs/s, ${(warm.msgsPerSec / warmRef.value).toFixed(2)}× the warm ref, ${warm.cpuUsPerEntry.toFixed(1)} µs CPU / entry` : ''}${counted && leaner ? `, ${Math.round(counted.perEntry).toLocaleString('en-US')} instructions / entry (${counted.runs.map(Math.round).join(', ')}), ${(counted.perEntry / leaner.value).toFixed(2)}× ${leaner.system}'s` : ''} (runs ${runs.join(', ')})\n`,
    );
  }
  process.stdout.write(
    [
      '',
      `Drain${smoke ? ' (SMOKE sizes: no figure here is a measurement)' : ''}, ${new Date().toISOString()}: ${SIZE.drain.toLocaleString('en-US')} preloaded entries, one consumer, batch ${BATCH}, no-op handler; the ${DRAIN_SYSTEMS.length} systems take turns ${SIZE.drainRounds} times (rotated), medians. × ref: × the better expert loop's msgs/s in this run (\`${ref.system}\`). ${warmLine(warmRef.system)}`,
      '',
      instructionsMethod(instructions),
      '',
      ...drainTable(ref.value, warmRef.value, leaner),
      ...(instructions.systems.some((x) => x.profile) ? ['', ...profileMarkdown(instructions)] : []),
    ].join('\n') + '\n',
  );
  admin.disconnect();
  await redis.stop();
  redisStopped = true;
  process.exit(0);
}
const ceiling = redisBenchmarkXadd();
if (!earlyOtherTransports) log('other NestJS Redis Streams transports (npm search, npm view, npm install --dry-run)');
const otherTransports = await (earlyOtherTransports ?? tryOtherTransports(log));

const telemetry = await telemetryCost();

log('per-entry costs');
const COST_SYSTEMS = [
  'expert-pipelined',
  'expert-readahead',
  'nestjs-redis-streams',
  'nestjs-redis-streams-batch',
  'naive-ioredis',
] as const;
await inTurn(COST_SYSTEMS, async (system) => {
  const key = fresh('costs');
  await preload(system, key, SIZE.profile);
  const result = await child({ mode: 'drain', system, key, n: SIZE.profile, batchSize: BATCH, concurrency: 1, profile: true });
  row(system).costs = { roundTripsPer1k: result.roundTripsPer1k, commandsPer1k: result.commandsPer1k, bytesPerEntry: result.bytesPerEntry };
  log(`  ${system}: ${result.roundTripsPer1k.toFixed(1)} round trips / 1,000 entries`);
  await cleanup(system, key);
});

log('concurrency scaling (handler awaits 1 ms of I/O)');
const scaling: { system: string; concurrency: number; msgsPerSec: number }[] = [];
const SCALING_RUNS = [
  ['expert-pipelined', 1],
  ['expert-readahead', 1],
  ['nestjs-redis-streams', 1],
  ['nestjs-redis-streams', 4],
  ['nestjs-redis-streams', 16],
  ['nestjs-redis-streams', 64],
  ['bullmq', 1],
  ['bullmq', 16],
] as const;
await inTurn(SCALING_RUNS, async ([system, concurrency], index) => {
  const key = fresh('scaling');
  await preload(system, key, SIZE.scaling);
  const result = await child({ mode: 'drain', system, key, n: SIZE.scaling, batchSize: BATCH, concurrency, ioMs: 1 });
  scaling[index] = { system, concurrency, msgsPerSec: result.msgsPerSec };
  log(`  ${system} x${concurrency}: ${Math.round(result.msgsPerSec)} msgs/s`);
  await cleanup(system, key);
});

// The same producer (bench/producer.ts, a process of its own) feeds every system: the same number of
// entries, the same bursts, at a fixed rate and at full speed; the systems take turns round after round.
log('steady state (end-to-end latency from append to handler; one producer process per run, the same for every system)');
// A smoke run leaves out the steady rows of the expert read-ahead loop and BullMQ: their consumers run in the
// drain section, and the producer and steady path are the same code for every system (they were a fifth of the smoke run).
const STEADY_SYSTEMS: SystemName[] = smoke
  ? ['expert-pipelined', 'nestjs-redis-streams', 'nest-redis-pubsub']
  : ['expert-pipelined', 'expert-readahead', 'nestjs-redis-streams', 'bullmq', 'nest-redis-pubsub'];
const steadyRuns = new Map<SystemName, { fixed1: Run[]; full1: Run[]; full4: Run[] }>(
  STEADY_SYSTEMS.map((s) => [s, { fixed1: [], full1: [], full4: [] }]),
);
// One system at a time even in a smoke run: a run starts up to five processes, which must all be ready within 30 s.
// A smoke run starts four consumers for one system only: the k-process path is the same code for all,
// and those 20 process starts were a third of the smoke run.
const fullFourRuns = (system: SystemName) => !smoke || system === 'nestjs-redis-streams';
for (let round = 0; round < SIZE.steadyRounds; round++) {
  for (const system of rotate(STEADY_SYSTEMS, round)) {
    const runs = steadyRuns.get(system)!;
    runs.fixed1.push(await steady(system, 1, SIZE.offeredRate));
    runs.full1.push(await steady(system, 1, undefined));
    if (round === 0 && fullFourRuns(system)) runs.full4.push(await steady(system, 4, undefined));
    const full = runs.full1.at(-1)!;
    log(
      `  round ${round + 1} ${system}: full speed ${Math.round(full.msgsPerSec)} msgs/s (producer ${Math.round(full.producerMsgsPerSec)}), p50 ${full.p50.toFixed(1)} ms, backlog at producer end ${full.backlogAtProducerEnd ?? '—'}`,
    );
  }
}
for (const [system, runs] of steadyRuns) {
  row(system).fixed1 = medianLatency(runs.fixed1);
  row(system).full1 = medianLatency(runs.full1);
  if (runs.full4.length > 0) row(system).full4 = medianLatency(runs.full4);
}

log('recovery and shutdown (nestjs-redis-streams)');
const minIdleMs = 2000;
const blockMs = 500;
await inTurn(['peer', 'self'] as const, async (kind) => {
  row('nestjs-redis-streams')[kind === 'peer' ? 'recoveryMs' : 'selfDrainMs'] = await recovery(kind);
});
// One at a time even in a smoke run: each looks for its parked consumer in CLIENT LIST.
row('nestjs-redis-streams').shutdownParkedMs = await shutdown(false);
row('nestjs-redis-streams').shutdownBusyMs = await shutdown(true);

await bullmqSection();
const retries = writeRetries(await benchRetries({ smoke, url: redis.url, log }));
const scale = writeScale(await benchScale({ smoke, url: redis.url, log }));
const ordered = writeOrdered(await benchOrdered({ smoke, url: redis.url, log }));
const flow = writeFlow(await benchFlow({ smoke, url: redis.url, log }));
const fair = writeFair(await benchFair({ smoke, url: redis.url, log }));
const schedules = writeSchedules(await benchSchedules({ smoke, url: redis.url, log }));
const durability = writeDurability(await benchDurability({ smoke, log }));
const reclaimPath = writeReclaimPath(await benchReclaimPath({ smoke, log }));

log('Redis Cluster: one logical stream, 1 vs 6 partitions, 1 and 3 consumer processes (local 3-master cluster)');
const cluster = await benchCluster({ smoke, batchSize: BATCH, log });

// ---------------------------------------------------------------------------------------------
const ours = row('nestjs-redis-streams');
const bull = row('bullmq');
const reference = {
  drain: better((r) => r.drain?.msgsPerSec),
  warm: better((r) => r.warm?.msgsPerSec),
  full: better((r) => r.full1?.msgsPerSec),
  instructions: leanerLoop(instructions, EXPERT_LOOPS),
};
const targets = {
  drainVsReference: ours.drain!.msgsPerSec / reference.drain.value,
  batchDrainVsReference: row('nestjs-redis-streams-batch').drain!.msgsPerSec / reference.drain.value,
  fullSpeedVsReference: ours.full1!.msgsPerSec / reference.full.value,
  drainVsBullmq: ours.drain!.msgsPerSec / bull.drain!.msgsPerSec,
};
const machine = `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${execFileSync('redis-server', ['--version']).toString().split(' ')[2]?.replace('v=', 'Redis ')}`;
const result = {
  date: new Date().toISOString(),
  smoke,
  ...(smoke ? { note: SMOKE_NOTE } : {}),
  machine,
  minutes: 0,
  sizes: SIZE,
  batchSize: BATCH,
  ceiling,
  reference,
  rows: [...rows.entries()].map(([name, r]) => ({ name, ...r })),
  scaling,
  recovery: { minIdleMs, blockMs, floorMs: minIdleMs + blockMs },
  targets,
  instructions: { ...instructions, method: instructionsMethod(instructions) },
  otherTransports,
  telemetry,
  retries,
  scale,
  ordered,
  flow,
  fair,
  schedules,
  reclaimPath,
  cluster,
};
result.minutes = Math.round((performance.now() - startedAt) / 600) / 100;
const markdown = toMarkdown(result);
process.stdout.write(markdown + '\n');
mkdirSync(new URL('./results/', pathToBench()), { recursive: true });
const base = smoke ? 'smoke' : 'latest';
const written = { json: new URL(`./results/${base}.json`, pathToBench()), md: new URL(`./results/${base}.md`, pathToBench()) };
writeFileSync(written.json, JSON.stringify(result, null, 2) + '\n');
writeFileSync(written.md, markdown + '\n');
admin.disconnect();
await redis.stop();
redisStopped = true;
const problems = incomplete();
if (problems.length > 0) {
  log(`FAILED: ${problems.length} check(s) did not pass:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
log(`every system completed every section, and the report is written (${fileURLToPath(written.md)}, ${fileURLToPath(written.json)}).`);
if (smoke) log(SMOKE_NOTE);
process.exit(0);

// ---------------------------------------------------------------------------------------------

/** What a run that completed must hold: every system measured in every section it takes part in, and the report on disk naming them all. */
function incomplete(): string[] {
  const problems: string[] = [];
  const finite = (v: number | undefined) => v !== undefined && Number.isFinite(v) && v > 0;
  for (const system of DRAIN_SYSTEMS) {
    const d = row(system).drain;
    if (!d || d.runs.length !== SIZE.drainRounds || !d.runs.every((r) => r > 0))
      problems.push(`drain: ${system} has ${d?.runs.length ?? 0} of ${SIZE.drainRounds} runs`);
  }
  for (const system of WARM_SYSTEMS) {
    const w = row(system).warm;
    if (!w || w.runs.length !== SIZE.warmRounds || !w.runs.every((r) => r > 0))
      problems.push(`warm drain: ${system} has ${w?.runs.length ?? 0} of ${SIZE.warmRounds} runs`);
  }
  if (instructions.counter !== undefined) {
    for (const system of INSTRUCTION_SYSTEMS) {
      const counted = row(system).instructions;
      if (!counted || counted.runs.length !== instructions.repeats || !counted.runs.every((r) => finite(r)))
        problems.push(
          `instructions: ${system} has ${counted?.runs.length ?? 0} of ${instructions.repeats} figures (${counted?.runs.join(', ')})`,
        );
    }
  }
  for (const system of COST_SYSTEMS) {
    if (!finite(row(system).costs?.roundTripsPer1k)) problems.push(`per-entry costs: ${system} has no round-trip count`);
  }
  if (scaling.length !== 8 || !scaling.every((s) => finite(s.msgsPerSec))) problems.push('concurrency scaling: a case is missing');
  for (const system of STEADY_SYSTEMS) {
    for (const [what, l, runs] of [
      ['fixed rate', row(system).fixed1, SIZE.steadyRounds],
      ['full speed, 1 consumer', row(system).full1, SIZE.steadyRounds],
      ['full speed, 4 consumers', row(system).full4, fullFourRuns(system) ? 1 : 0],
    ] as const) {
      if (runs === 0) continue;
      if (!l || l.runs.length !== runs) problems.push(`steady ${what}: ${system} has ${l?.runs.length ?? 0} of ${runs} runs`);
      // Durable systems deliver everything; pub/sub may drop, but something must have arrived.
      else if (system === 'nest-redis-pubsub' ? l.delivered === 0 : l.delivered < l.sent)
        problems.push(`steady ${what}: ${system} delivered ${l.delivered} of ${l.sent}`);
    }
  }
  for (const [what, v] of [
    ['recovery by a peer', ours.recoveryMs],
    ['self-drain', ours.selfDrainMs],
    ['shutdown parked', ours.shutdownParkedMs],
    ['shutdown busy', ours.shutdownBusyMs],
  ] as const) {
    if (!finite(v)) problems.push(`${what}: no figure`);
  }
  if (!telemetry.variants.every((v) => v.runs.length === SIZE.drainRounds)) problems.push('OpenTelemetry cost: a variant is missing runs');
  if (cluster.cases.length !== 4 || !cluster.cases.every((c) => c.runs.length === cluster.rounds))
    problems.push('Redis Cluster: a case is missing runs');
  if (otherTransports.attempts.length === 0) problems.push('other transports: nothing was tried');
  problems.push(...retriesProblems(retries));
  problems.push(...scale.problems.map((p) => `scale: ${p}`));
  problems.push(...ordered.problems.map((p) => `ordered: ${p}`));
  problems.push(...flow.problems.map((p) => `flow: ${p}`));
  problems.push(...fair.problems.map((p) => `fair: ${p}`));
  problems.push(...schedules.problems.map((p) => `schedules: ${p}`));
  problems.push(...durability.problems.map((p) => `durability: ${p}`));
  problems.push(...reclaimPath.problems.map((p) => `reclaim path: ${p}`));
  for (const file of [written.md, written.json]) {
    if (!existsSync(file)) problems.push(`report not written: ${fileURLToPath(file)}`);
  }
  if (existsSync(written.md)) {
    const text = readFileSync(written.md, 'utf8');
    for (const r of rows.values()) if (!text.includes(r.system)) problems.push(`report: no row for "${r.system}"`);
    if (!text.includes(CLUSTER_HEADING)) problems.push('report: no Redis Cluster section');
    if (smoke && !text.includes(SMOKE_NOTE)) problems.push('report: the smoke note is missing');
  }
  return problems;
}

type TelemetryVariant =
  | 'no API'
  | 'API, telemetry: false'
  | 'API, no SDK'
  | 'API + SDK, telemetry: false'
  | 'API + SDK, parent-based (10 % sampled)'
  | 'API + SDK, always on';
interface TelemetryCost {
  n: number;
  rounds: number;
  /** Median drain msgs/s and CPU µs per entry of each variant, and every run's msgs/s. */
  variants: { variant: TelemetryVariant; msgsPerSec: number; cpuUsPerEntry: number; runs: number[] }[];
  /**
   * The SDK's own calls per entry without a transport, with the spans' attributes, cold (bench/otel-calls.ts: a fresh
   * process, as each drain is): median CPU µs per entry, by sampler. The yardstick of the transport's own cost.
   */
  callsCold: Record<OtelSampler, number>;
  /** The same calls without the attributes once warm (bench/otel-calls.ts): median CPU µs per entry, by sampler. */
  callsAlone: Record<OtelSampler, number>;
  /** The same calls with the attributes the transport gives a recorded span (bench/otel-calls.ts): median CPU µs per entry, by sampler. */
  callsWithAttributes: Record<OtelSampler, number>;
  /**
   * Instructions per entry (bench/instructions.ts): the drain with the SDK and the transport's telemetry off, the same
   * always on, and the SDK's calls alone always on (otel-calls' cold pass), each counted over the same window of
   * entries. They do not move with the machine's load, as the CPU µs above do.
   */
  instructions: InstructionSection<TelemetryCounted>;
}

/** What the telemetry section counts the instructions of (see TelemetryCost.instructions). */
type TelemetryCounted = 'sdk-telemetry-off' | 'sdk-always-on' | 'sdk-calls-always-on';

/**
 * What OpenTelemetry costs the drain: without `@opentelemetry/api` (hidden from the child), with
 * it but no SDK (the nil-cost promise), with an SDK and the transport's telemetry off (what the SDK's
 * context manager costs the drain by itself), and with an SDK recording spans and metrics. They
 * take turns, round after round, and report medians.
 */
async function telemetryCost(): Promise<TelemetryCost> {
  log(
    'OpenTelemetry cost (nestjs-redis-streams drain: no API / API, telemetry off / API without SDK / API + SDK, telemetry off / API + SDK)',
  );
  const variants: TelemetryVariant[] = [
    'no API',
    'API, telemetry: false',
    'API, no SDK',
    'API + SDK, telemetry: false',
    'API + SDK, parent-based (10 % sampled)',
    'API + SDK, always on',
  ];
  const runs = new Map<TelemetryVariant, { msgsPerSec: number; cpuUsPerEntry: number }[]>();
  const cold: Record<OtelSampler, number[]> = { parent: [], always: [] };
  const alone: Record<OtelSampler, number[]> = { parent: [], always: [] };
  const withAttributes: Record<OtelSampler, number[]> = { parent: [], always: [] };
  for (let round = 0; round < SIZE.drainRounds; round++) {
    // A different variant goes first each round: no variant gets the machine's warmest or coldest slot every time.
    await inTurn([...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)], async (variant) => {
      const key = fresh('otel');
      // Every variant drains the same entries: each carries its producer's trace context, one in ten sampled (a
      // producer's 10 % ratio sampler). Parent-based (the SDK's default) follows it; always on records every one.
      await preloadTraced(key, SIZE.drain, 10);
      const result = await child({
        mode: 'drain',
        system: 'nestjs-redis-streams',
        key,
        n: SIZE.drain,
        batchSize: BATCH,
        concurrency: 1,
        hideOtel: variant === 'no API',
        otelSdk: variant.startsWith('API + SDK'),
        otelSampler: variant === 'API + SDK, always on' ? 'always' : 'parent',
        ...(variant.endsWith('telemetry: false') ? { telemetry: false } : {}),
      });
      // The variant must be what it claims: the hook really hid the API, or it really was there.
      if (result.otelApi !== (variant !== 'no API'))
        throw new Error(`bench: variant "${variant}" ran with @opentelemetry/api ${result.otelApi ? 'present' : 'absent'}`);
      runs.set(variant, [...(runs.get(variant) ?? []), result]);
      log(`  ${variant}: ${Math.round(result.msgsPerSec)} msgs/s, ${result.cpuUsPerEntry.toFixed(1)} µs CPU per entry`);
      await cleanup('nestjs-redis-streams', key);
    });
    for (const sampler of ['parent', 'always'] as const) {
      const calls = (await runJson(OTEL_CALLS, { n: SIZE.drain, otelSampler: sampler })) as {
        coldUsPerEntry: number;
        cpuUsPerEntry: number;
        withAttributesUsPerEntry: number;
      };
      cold[sampler].push(calls.coldUsPerEntry);
      alone[sampler].push(calls.cpuUsPerEntry);
      withAttributes[sampler].push(calls.withAttributesUsPerEntry);
      log(
        `  SDK calls alone, ${sampler}: ${calls.coldUsPerEntry.toFixed(1)} µs CPU per entry cold (with the spans' attributes); warm ${calls.cpuUsPerEntry.toFixed(1)}, ${calls.withAttributesUsPerEntry.toFixed(1)} with the attributes`,
      );
    }
  }
  return {
    n: SIZE.drain,
    rounds: SIZE.drainRounds,
    variants: variants.map((variant) => {
      const r = runs.get(variant)!;
      return {
        variant,
        msgsPerSec: median(r.map((x) => x.msgsPerSec)),
        cpuUsPerEntry: median(r.map((x) => x.cpuUsPerEntry)),
        runs: r.map((x) => Math.round(x.msgsPerSec)),
      };
    }),
    callsCold: { parent: median(cold.parent), always: median(cold.always) },
    callsAlone: { parent: median(alone.parent), always: median(alone.always) },
    callsWithAttributes: { parent: median(withAttributes.parent), always: median(withAttributes.always) },
    // After the rates, never beside them: the counted children load both cores.
    instructions: flags['no-instructions']
      ? notCounted<TelemetryCounted>('left out: --no-instructions')
      : await countInstructions({
          systems: ['sdk-telemetry-off', 'sdk-always-on', 'sdk-calls-always-on'] as const,
          smoke,
          log,
          ...(flags['instructions-dir'] === undefined ? {} : { keepIn: flags['instructions-dir'] }),
          drain: async (counted, { wrap, nodeFlags, childArgs }) => {
            if (counted === 'sdk-calls-always-on') return runJson(OTEL_CALLS, { otelSampler: 'always', ...childArgs }, { wrap, nodeFlags });
            const key = fresh('otel-instructions');
            await preloadTraced(key, childArgs.n, 10);
            const report = await child(
              {
                mode: 'drain',
                system: 'nestjs-redis-streams',
                key,
                batchSize: BATCH,
                concurrency: 1,
                otelSdk: true,
                otelSampler: 'always',
                ...(counted === 'sdk-telemetry-off' ? { telemetry: false } : {}),
                ...childArgs,
              },
              { wrap, nodeFlags },
            );
            await cleanup('nestjs-redis-streams', key);
            return report;
          },
        }),
  };
}

function telemetryMarkdown(t: TelemetryCost): string {
  const base = t.variants[0]!;
  return [
    `OpenTelemetry cost: drain of ${t.n.toLocaleString('en-US')} entries, batch ${BATCH}, no-op handler, the variants taking turns ${t.rounds} times, medians (× the run without the API).`,
    '',
    '| nestjs-redis-streams | drain msgs/s | × no API | CPU µs / entry | runs msgs/s |',
    '| --- | ---: | ---: | ---: | --- |',
    ...t.variants.map(
      (v) =>
        `| ${v.variant} | ${Math.round(v.msgsPerSec).toLocaleString('en-US')} | ${(v.msgsPerSec / base.msgsPerSec).toFixed(2)}× | ${v.cpuUsPerEntry.toFixed(1)} | ${v.runs.join(', ')} |`,
    ),
    '',
    ...(['parent', 'always'] as const).map((sampler) => {
      // A floor of f× the no-API drain leaves base × (1/f − 1) µs per entry for everything telemetry adds.
      const floor = sampler === 'parent' ? 0.75 : 0.55;
      const budget = base.cpuUsPerEntry * (1 / floor - 1);
      const calls = t.callsCold[sampler];
      const added =
        t.variants.find((v) => v.variant.startsWith(sampler === 'parent' ? 'API + SDK, parent' : 'API + SDK, always'))!.cpuUsPerEntry -
        base.cpuUsPerEntry;
      // What the SDK's context manager costs the drain with the transport's telemetry off (its hooks on every promise).
      const hooks = t.variants.find((v) => v.variant === 'API + SDK, telemetry: false')!.cpuUsPerEntry - base.cpuUsPerEntry;
      // The drain is cold (a fresh process, from its first entry): so is the yardstick, the SDK's calls over as many entries
      // in a fresh process with the attributes a recorded span gets. Warm, the same calls cost less (shown).
      return (
        `- ${sampler === 'parent' ? 'Parent-based (10 % sampled)' : 'Always on'}: the floor of ${floor}× leaves ${budget.toFixed(1)} µs of CPU per entry for telemetry. ` +
        `The SDK's own calls per entry (extract, startSpan, the recorded spans' ten attributes, context.with, end, one histogram record; bench/otel-calls.ts, no transport, no Redis) take ${calls.toFixed(1)} µs from a fresh process over as many entries, as the drain is measured (${(calls / budget).toFixed(2)}× that budget); ${t.callsAlone[sampler].toFixed(1)} µs once warm without the attributes, ${t.callsWithAttributes[sampler].toFixed(1)} with them. ` +
        `The transport adds ${added.toFixed(1)} µs in all: ${(added - calls).toFixed(1)} µs beyond the SDK's calls (target ≤ 2 µs), of which the context manager's hooks on the drain's own promises (API + SDK with telemetry: false, against no API) take ${hooks.toFixed(1)} µs.` +
        (calls >= budget ? ` The SDK's calls alone exceed the floor's budget: no transport reaches ${floor}× with this SDK.` : '')
      );
    }),
    ...telemetryInstructions(t),
  ].join('\n');
}

/**
 * The instruction counts of always-on telemetry: what it adds to the drain (always on against telemetry off, both with
 * the SDK, so the context manager's hooks on the drain's own promises are in both), against the SDK's calls alone.
 */
function telemetryInstructions(t: TelemetryCost): string[] {
  const s = t.instructions;
  if (s.counter === undefined) return ['', `- Instructions per entry: not counted (${s.why ?? 'not asked for'}).`];
  const of = (c: TelemetryCounted) => s.systems.find((x) => x.system === c)!;
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  const runs = (c: TelemetryCounted) => `${n(of(c).perEntry)} (${of(c).runs.map(n).join(', ')})`;
  const added = of('sdk-always-on').perEntry - of('sdk-telemetry-off').perEntry;
  const calls = of('sdk-calls-always-on').perEntry;
  const cpuAdded =
    t.variants.find((v) => v.variant === 'API + SDK, always on')!.cpuUsPerEntry -
    t.variants.find((v) => v.variant === 'API + SDK, telemetry: false')!.cpuUsPerEntry;
  // Instructions per ns: telemetry's in the drain, and the SDK's calls' alone.
  const inDrain = added / cpuAdded / 1000;
  const alone = calls / t.callsCold.always / 1000;
  return [
    '',
    `- Always on, in instructions per entry (${s.counter}; entries ${n(s.n1)} to ${n(s.n2)} of a fresh process, as the drain section counts; median of ${s.repeats}, each in brackets): the drain with the SDK and telemetry off ${runs('sdk-telemetry-off')}, always on ${runs('sdk-always-on')}; the SDK's calls alone, cold, over the same entries ${runs('sdk-calls-always-on')}. ` +
      `Telemetry adds ${n(added)} instructions per entry to the drain, of which ${n(added - calls)} (${((100 * (added - calls)) / calls).toFixed(0)} % of the SDK's own) are beyond the SDK's calls: ${((added - calls) / (added / cpuAdded)).toFixed(1)} µs at the rate telemetry runs at in the drain (target ≤ 2 µs). ` +
      `In CPU it adds ${cpuAdded.toFixed(1)} µs (always on against telemetry off, above): ${inDrain.toFixed(1)} instructions per ns, where the SDK's calls alone run ${alone.toFixed(1)}` +
      (inDrain < alone
        ? ": inside a drain the same calls run slower per instruction (likely: the caches there also hold ioredis', the reads' and the transport's code and data), and the CPU µs count that as the transport's."
        : ': in this run the drain ran them no slower per instruction.'),
  ];
}

/** The retry section written to results/retries.md (a smoke run: retries-smoke.md); `--only retries` prints it too. */
function writeRetries(section: RetrySection): RetrySection {
  return writeSection('retries', 'retries', retriesMarkdown(section, SMOKE_NOTE), section);
}

function writeScale(section: ScaleSection): ScaleSection {
  return writeSection('scale', 'scale', scaleMarkdown(section, SMOKE_NOTE), section);
}

/** The ordered section written to results/ordered.md (a smoke run: ordered-smoke.md); `--only ordered` prints it too. */
function writeOrdered(section: OrderedSection): OrderedSection {
  return writeSection('ordered', 'ordered', orderedMarkdown(section, SMOKE_NOTE), section);
}

/** The flow-control section written to results/flow.md (a smoke run: flow-smoke.md); `--only flow` prints it too. */
function writeDurability(section: DurabilitySection): DurabilitySection {
  return writeSection('durability', 'durability', durabilityMarkdown(section, SMOKE_NOTE), section);
}

/** The schedules section written to results/schedules.md (a smoke run: schedules-smoke.md); `--only schedules` prints it too. */
function writeSchedules(section: SchedulesSection): SchedulesSection {
  return writeSection('schedules', 'schedules', schedulesMarkdown(section, SMOKE_NOTE), section);
}

function writeFlow(section: FlowSection): FlowSection {
  return writeSection('flow', 'flow', flowMarkdown(section, SMOKE_NOTE), section);
}

/** The fair-groups section written to results/fair.md (a smoke run: fair-smoke.md); `--only fair` prints it too. */
function writeFair(section: FairSection): FairSection {
  return writeSection('fair', 'fair', fairMarkdown(section, SMOKE_NOTE), section);
}

/** The reclaim-path section written to results/reclaim-path.md (a smoke run: reclaim-path-smoke.md); `--only reclaim` prints it too. */
function writeReclaimPath(section: ReclaimPathSection): ReclaimPathSection {
  return writeSection('reclaim', 'reclaim-path', reclaimPathMarkdown(section, SMOKE_NOTE), section);
}

/** A section's `markdown` written to results/`file`.md (a smoke run: `file`-smoke.md), and printed when it ran alone (`--only only`). */
function writeSection<T>(only: string, file: string, markdown: string, section: T): T {
  if (flags.only === only) process.stdout.write(markdown + '\n');
  mkdirSync(new URL('./results/', pathToBench()), { recursive: true });
  writeFileSync(new URL(`./results/${file}${smoke ? '-smoke' : ''}.md`, pathToBench()), `${markdown}\n`);
  return section;
}

/** The bench sources' folder (results live beside them, not in the build output). */
function pathToBench(): URL {
  return new URL('../../../bench/', import.meta.url);
}

/** `--only cluster`: the cluster section replaces its previous self in the results files; the rest stays as it was. */
function replaceClusterSection(cluster: ClusterSection, markdown: string): void {
  mkdirSync(new URL('./results/', pathToBench()), { recursive: true });
  const base = new URL(`./results/${smoke ? 'smoke' : 'latest'}`, pathToBench()).href;
  const json = new URL(`${base}.json`);
  const md = new URL(`${base}.md`);
  const previous = existsSync(json) ? JSON.parse(readFileSync(json, 'utf8')) : {};
  writeFileSync(json, JSON.stringify({ ...previous, cluster }, null, 2) + '\n');
  const text = existsSync(md) ? readFileSync(md, 'utf8').trimEnd() : '';
  const at = text.indexOf(CLUSTER_HEADING);
  const kept = (at < 0 ? text : text.slice(0, at)).trimEnd();
  writeFileSync(md, (kept ? `${kept}\n\n` : '') + markdown + '\n');
}

async function preload(system: SystemName, key: string, n: number): Promise<void> {
  if (system === 'bullmq') {
    const queue = new Queue(key, { connection: { url: redis.url } });
    for (let i = 0; i < n; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: 'job', data: {} })));
    }
    await queue.close();
    return;
  }
  await admin.xgroup('CREATE', key, 'bench', '0', 'MKSTREAM');
  for (let i = 0; i < n; i += 1000) {
    const p = admin.pipeline();
    for (let j = i; j < Math.min(n, i + 1000); j++) p.xadd(key, '*', 'n', String(j));
    await p.exec();
  }
}

/** `n` entries with a W3C trace context in their headers (wire format), every `sampledEvery`-th sampled. */
async function preloadTraced(key: string, n: number, sampledEvery: number): Promise<void> {
  await admin.xgroup('CREATE', key, 'bench', '0', 'MKSTREAM');
  for (let i = 0; i < n; i += 1000) {
    const p = admin.pipeline();
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const traceparent = traceparentOf(j, sampledEvery);
      p.xadd(key, '*', 'data', JSON.stringify({ n: j }), 'headers', JSON.stringify({ traceparent }));
    }
    await p.exec();
  }
}

async function cleanup(system: SystemName, key: string): Promise<void> {
  if (system === 'bullmq') {
    const queue = new Queue(key, { connection: { url: redis.url } });
    await queue.obliterate({ force: true });
    await queue.close();
  } else {
    await admin.del(key);
  }
}

/** Runs the child to completion (`launch`: see spawnChild) and returns its last JSON line. */
async function child(args: Record<string, unknown>, launch: Launch = {}): Promise<any> {
  const proc = spawnChild({ group: 'bench', consumer: 'c1', url: redis.url, ...args }, CHILD, launch);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let last: any;
  for await (const line of createInterface({ input: proc.stdout! })) last = JSON.parse(line);
  const code = await exited;
  if (code !== 0 || last === undefined) throw new Error(`bench child failed (exit ${code}): ${JSON.stringify(args)}`);
  // Every preloaded entry handled exactly once (and, for the child to finish, none left pending).
  if (args.mode === 'drain' && last.handled !== args.n)
    throw new Error(`bench: ${String(args.system)} handled ${last.handled} of ${String(args.n)} entries: ${JSON.stringify(args)}`);
  return last;
}

/** Runs a script that prints one JSON line (bench/otel-calls.ts) and returns it (`launch`: see spawnChild). */
async function runJson(file: string, args: Record<string, unknown>, launch: Launch = {}): Promise<any> {
  const proc = spawnChild(args, file, launch);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let last: any;
  for await (const line of createInterface({ input: proc.stdout! })) last = JSON.parse(line);
  const code = await exited;
  if (code !== 0 || last === undefined) throw new Error(`bench: ${file} failed (exit ${code}): ${JSON.stringify(args)}`);
  return last;
}

/**
 * How a child is started: `wrap`, a command that starts node itself with its arguments (valgrind, perf stat:
 * bench/instructions.ts); `nodeFlags`, node's own flags.
 */
interface Launch {
  wrap?: string[];
  nodeFlags?: string[];
}

function spawnChild(args: Record<string, unknown>, file = CHILD, { wrap = [], nodeFlags = [] }: Launch = {}): ChildProcess {
  const node = [process.execPath, ...nodeFlags, ...(args.hideOtel ? ['--import', HIDE_OTEL] : []), file, JSON.stringify(args)];
  const [command, ...rest] = [...wrap, ...node];
  const proc = spawn(command!, rest, { stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

/** One steady-state run: its figures, before the rounds' medians. */
type Run = Omit<Latency, 'runs'>;

/** Medians of the runs' figures (each figure on its own); the runs' msgs/s listed. */
function medianLatency(runs: Run[]): Latency {
  const m = (f: (r: Run) => number | undefined) => median(runs.map(f).filter((v): v is number => v !== undefined));
  return {
    msgsPerSec: m((r) => r.msgsPerSec),
    producerMsgsPerSec: m((r) => r.producerMsgsPerSec),
    backlogAtProducerEnd: runs.some((r) => r.backlogAtProducerEnd !== undefined) ? m((r) => r.backlogAtProducerEnd) : undefined,
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb)),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    delivered: Math.min(...runs.map((r) => r.delivered)),
    sent: Math.min(...runs.map((r) => r.sent)),
    runs: runs.map((r) => Math.round(r.msgsPerSec)),
  };
}

/**
 * k consumers, then the producer process (bench/producer.ts): at `rate` msgs/s for SIZE.fixedSeconds,
 * or SIZE.fullSpeed entries as fast as it can; latencies (append → handler) merged. Throughput runs from
 * the producer's first write to the last entry handled.
 */
async function steady(system: SystemName, k: number, rate: number | undefined): Promise<Run> {
  const key = fresh('steady');
  if (readsStream(system)) await admin.xgroup('CREATE', key, 'bench', '$', 'MKSTREAM');
  const consumers = Array.from({ length: k }, (_, i) => {
    const proc = spawnChild({
      mode: 'consume',
      system,
      key,
      url: redis.url,
      group: 'bench',
      consumer: `c${i}`,
      batchSize: BATCH,
      concurrency: 1,
    });
    const lines = createInterface({ input: proc.stdout! });
    const state = {
      proc,
      ready: false,
      progress: 0,
      report: undefined as undefined | { latencies: number[]; last: number; peakRssMb: number },
    };
    lines.on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.ready) state.ready = true;
      if (msg.progress !== undefined) state.progress = msg.progress;
      if (msg.latencies) state.report = msg;
    });
    return state;
  });
  const kind: ProducerArgs['kind'] = system === 'bullmq' ? 'bullmq' : system === 'nest-redis-pubsub' ? 'pubsub' : 'stream';
  const n = rate === undefined ? SIZE.fullSpeed : rate * SIZE.fixedSeconds;
  // Bursts: a batch at full speed; at a fixed rate, one every 10 ms.
  const burst = rate === undefined ? BATCH : Math.max(1, Math.round(rate / 100));
  const producerArgs: ProducerArgs = { url: redis.url, kind, key, n, burst, ...(rate === undefined ? {} : { rate }) };
  const producer = spawnChild(producerArgs as unknown as Record<string, unknown>, PRODUCER);
  let producerReady = false;
  let summary: ProducerSummary | undefined;
  createInterface({ input: producer.stdout! }).on('line', (line) => {
    const msg = JSON.parse(line);
    if (msg.ready) producerReady = true;
    if (msg.sent !== undefined) summary = msg;
  });
  await waitFor(() => consumers.every((c) => c.ready) && producerReady, { timeoutMs: 30_000, message: 'consumers and producer ready' });
  producer.stdin!.write('go\n');
  await waitFor(() => summary !== undefined, { timeoutMs: 300_000, message: 'the producer' });
  const { sent, firstAt, lastAt } = summary!;
  const backlogAtProducerEnd = await backlog(system, key);
  // Pub/sub fans out: each of the k subscribers gets every message. A group shares them out.
  const fanOut = system === 'nest-redis-pubsub' ? k : 1;
  // Durable systems get everything; pub/sub may drop: wait for silence instead (no progress over two polls).
  let last = -1;
  let quiet = 0;
  await waitFor(
    () => {
      const total = consumers.reduce((s, c) => s + c.progress, 0);
      quiet = total === last ? quiet + 1 : 0;
      last = total;
      return total >= sent * fanOut || (system === 'nest-redis-pubsub' && quiet >= 2);
    },
    { timeoutMs: 300_000, intervalMs: 200, message: 'consumers to catch up' },
  );
  for (const c of consumers) c.proc.stdin!.write('report\n');
  await waitFor(() => consumers.every((c) => c.report), { timeoutMs: 20_000, message: 'reports' });
  const latencies = consumers.flatMap((c) => c.report!.latencies).sort((a, b) => a - b);
  const finished = Math.max(...consumers.map((c) => c.report!.last));
  await cleanup(system, key);
  // Messages, not deliveries: with k pub/sub subscribers, a message delivered to all k counts once.
  const delivered = latencies.length / fanOut;
  // Durable systems: every entry handled exactly once, among all consumers.
  if (system !== 'nest-redis-pubsub' && delivered !== sent)
    throw new Error(`bench: ${system} (${k} consumers) handled ${delivered} of ${sent} entries`);
  return {
    msgsPerSec: (delivered / (finished - firstAt)) * 1000,
    producerMsgsPerSec: (sent / (lastAt - firstAt)) * 1000,
    backlogAtProducerEnd,
    peakRssMb: Math.max(...consumers.map((c) => c.report!.peakRssMb)),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    delivered,
    sent,
  };
}

/** Entries written and not yet delivered: a stream group's lag (Redis 7), BullMQ's waiting jobs; pub/sub keeps none. */
async function backlog(system: SystemName, key: string): Promise<number | undefined> {
  if (system === 'nest-redis-pubsub') return undefined;
  if (system === 'bullmq') return Number(await admin.llen(`bull:${key}:wait`));
  const [group] = (await admin.xinfo('GROUPS', key)) as unknown[][];
  const lag = group?.[group.indexOf('lag') + 1];
  return lag === null || lag === undefined ? undefined : Number(lag);
}

/** A consumer holding `SIZE.recovery` pending entries is SIGKILLed; a peer (or itself, restarted) settles them. */
async function recovery(kind: 'peer' | 'self'): Promise<number> {
  const key = fresh('recovery');
  await preload('nestjs-redis-streams', key, SIZE.recovery);
  // The victim takes every entry and dies holding them.
  const holder = new Redis(redis.url);
  await holder.xreadgroup('GROUP', 'bench', 'victim', 'COUNT', SIZE.recovery, 'STREAMS', key, '>');
  holder.disconnect();
  const killedAt = performance.now();
  const consumer = kind === 'peer' ? 'peer' : 'victim';
  const proc = spawnChild({
    mode: 'consume',
    system: 'nestjs-redis-streams',
    key,
    url: redis.url,
    group: 'bench',
    consumer,
    batchSize: BATCH,
    concurrency: 1,
    blockMs,
    minIdleMs: kind === 'peer' ? minIdleMs : 600_000,
  });
  proc.stdout!.resume();
  await waitFor(async () => Number(((await admin.xpending(key, 'bench')) as [number])[0]) === 0, {
    timeoutMs: 60_000,
    intervalMs: 10,
    message: `${kind} recovery`,
  });
  const ms = performance.now() - killedAt;
  proc.kill('SIGTERM');
  await new Promise((resolve) => proc.once('exit', resolve));
  await admin.del(key);
  return ms;
}

/** SIGTERM → exit, while parked on BLOCK 5000 or while a 200 ms handler is in hand. */
async function shutdown(busy: boolean): Promise<number> {
  const key = fresh('shutdown');
  await admin.xgroup('CREATE', key, 'bench', '$', 'MKSTREAM');
  const proc = spawnChild({
    mode: 'consume',
    system: 'nestjs-redis-streams',
    key,
    url: redis.url,
    group: 'bench',
    consumer: 'c',
    batchSize: BATCH,
    concurrency: 1,
    blockMs: 5000,
    ioMs: busy ? 200 : 0,
  });
  let ready = false;
  let progress = 0;
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const msg = JSON.parse(line);
    if (msg.ready) ready = true;
    if (msg.progress !== undefined) progress = msg.progress;
  });
  await waitFor(() => ready, { timeoutMs: 20_000, message: 'consumer ready' });
  if (busy) {
    await admin.xadd(key, '*', 't', String(performance.timeOrigin + performance.now()));
    await waitFor(() => progress > 0, { timeoutMs: 10_000, message: 'handler in hand' });
  } else {
    // Parked: Redis lists a client blocked (flag b) in XREADGROUP.
    await waitFor(async () => /flags=\S*b\S* .*cmd=xreadgroup/.test(String(await admin.client('LIST'))), {
      timeoutMs: 10_000,
      message: 'the consumer parked',
    });
  }
  const start = performance.now();
  proc.kill('SIGTERM');
  await new Promise((resolve) => proc.once('exit', resolve));
  await admin.del(key);
  return performance.now() - start;
}

function redisBenchmarkXadd(): { msgsPerSec: number; command: string } | undefined {
  const args = [
    '-h',
    '127.0.0.1',
    '-p',
    String(redis.port),
    '-n',
    smoke ? '2000' : '200000',
    '-c',
    '50',
    '-P',
    '16',
    '-q',
    'XADD',
    'bench:ceiling',
    'MAXLEN',
    '~',
    '100000',
    '*',
    'n',
    '1',
  ];
  try {
    const out = execFileSync('redis-benchmark', args).toString();
    const match = /([\d.]+) requests per second/.exec(out);
    void admin.del('bench:ceiling');
    return match ? { msgsPerSec: Number(match[1]), command: `redis-benchmark ${args.join(' ')}` } : undefined;
  } catch {
    log('redis-benchmark not available: no server ceiling row');
    return undefined;
  }
}

function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
/**
 * The drain table (every drain system's row), in the full report and printed by `--only drain`: `ref` the better
 * expert loop's msgs/s, `leaner` the expert loop with the fewer instructions per entry (undefined: none counted).
 */
/** What the warm columns measure, for the text above the drain table. */
function warmLine(warmRef: SystemName): string {
  return `Warm: each stream system drains ${SIZE.drain.toLocaleString('en-US')} entries, then ${SIZE.warmDrain.toLocaleString('en-US')} more in the same process, and only those are timed (from the handler's call for entry ${(SIZE.drain + 1).toLocaleString('en-US')} to the last ack; ${SIZE.warmRounds} round(s), rotated, medians; warm × ref: × the better expert loop's warm msgs/s, \`${warmRef}\`). A cold drain is largely V8 compiling and optimizing the consumer's code; the warm figure is what a worker that has run a while spends per entry.`;
}

function drainTable(ref: number, warmRef: number, leaner: { system: SystemName; value: number } | undefined): string[] {
  const n = (v: number | undefined, digits = 0) =>
    v === undefined || Number.isNaN(v) ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const instructionsCell = (c: Row['instructions']) =>
    c ? `${n(c.perEntry)}${c.runs.length > 1 ? ` (${c.runs.map((v) => n(v)).join(', ')})` : ''}` : '—';
  return [
    `| drain | msgs/s (median) | × ref | runs msgs/s (round order) | consumer CPU µs / entry | warm msgs/s (median) | warm × ref | warm runs msgs/s | warm CPU µs / entry | instructions / entry | instructions × ${leaner ? `\`${leaner.system}\`` : 'the leaner loop'} | full GCs in the window | peak RSS MB |`,
    '| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    ...DRAIN_SYSTEMS.map((s) => {
      const { drain: d, warm: w, instructions: c } = row(s);
      return `| ${[
        row(s).system,
        n(d?.msgsPerSec),
        d ? `${(d.msgsPerSec / ref).toFixed(2)}×` : '—',
        d?.runs.join(', ') ?? '—',
        n(d?.cpuUsPerEntry, 1),
        n(w?.msgsPerSec),
        w ? `${(w.msgsPerSec / warmRef).toFixed(2)}×` : '—',
        w?.runs.join(', ') ?? '—',
        n(w?.cpuUsPerEntry, 1),
        instructionsCell(c),
        c && leaner ? `${(c.perEntry / leaner.value).toFixed(2)}×` : '—',
        c ? c.majorGcs.join(', ') : '—',
        n(d?.peakRssMb),
      ].join(' | ')} |`;
    }),
  ];
}

function toMarkdown(r: typeof result): string {
  const n = (v: number | undefined, digits = 0) =>
    v === undefined || Number.isNaN(v) ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const x = (v: number | undefined, ref: number | undefined) => (v === undefined || ref === undefined ? '—' : `${(v / ref).toFixed(2)}×`);
  const lat = (l: Latency | undefined) => (l ? `${n(l.p50, 1)} / ${n(l.p99, 1)}` : '—');
  const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  const get = (s: SystemName) => row(s);
  const refDrain = r.reference.drain;
  const refFull = r.reference.full;
  const pubsub = get('nest-redis-pubsub').full1;
  const times = (k: number) => `${k} time${k === 1 ? '' : 's'}`;
  const met = (v: number, floor: number, target: number) =>
    `${v.toFixed(2)}× (floor ≥ ${floor}×: ${v >= floor ? 'held' : 'MISSED'}; target ${target}×: ${v >= target ? 'reached' : 'not reached'})`;
  const lines = [
    `Benchmark ${r.smoke ? '(SMOKE sizes) ' : ''}— ${r.date} (${r.minutes} min)`,
    ...(r.smoke ? ['', `> **${SMOKE_NOTE}**`] : []),
    '',
    `Machine: ${r.machine}. Reference ("× ref"): the better of two hand-written expert ioredis loops at batch ${r.batchSize}, by its median in this run: drain \`${refDrain.system}\` (${n(refDrain.value)} msgs/s), full speed \`${refFull.system}\` (${n(refFull.value)} msgs/s). \`expert-pipelined\` sends each batch's XACK and the next XREADGROUP in one pipeline (one round trip per batch); \`expert-readahead\` sends the next XREADGROUP as soon as a batch arrives (on a second connection) and the batch's XACK without waiting for it; both await the handler per entry (bench/systems.ts).`,
    '',
    `Drain: ${n(r.sizes.drain)} preloaded entries, one consumer, batch ${r.batchSize}, no-op handler, from the first entry handled to the last acked. The ${DRAIN_SYSTEMS.length} systems take turns ${times(r.sizes.drainRounds)} (the order rotates, so each goes first in turn); medians shown, every run listed. ${warmLine(r.reference.warm.system)}`,
    '',
    r.instructions.method,
    '',
    ...drainTable(refDrain.value, r.reference.warm.value, r.reference.instructions),
    r.ceiling
      ? line([
          `redis-benchmark XADD (server ceiling, -P 16 -c 50)`,
          n(r.ceiling.msgsPerSec),
          x(r.ceiling.msgsPerSec, refDrain.value),
          '—',
          '—',
          '—',
          '—',
          '—',
          '—',
        ])
      : '',
    '',
    `Steady state: latency from the producer's append to the handler. One producer program (bench/producer.ts, a process of its own, started afresh for every run) feeds every system the same number of entries in the same bursts (${r.batchSize} per round trip at full speed, one burst in flight): ${n(r.sizes.offeredRate)} msgs/s for ${r.sizes.fixedSeconds} s (bursts every 10 ms, on a schedule), or ${n(r.sizes.fullSpeed)} entries as fast as it can. Stream systems get XADDs; BullMQ gets jobs (one \`Queue.addBulk\` per burst: a queue, not a stream, so the same count and shape, not the very same entries); Transport.REDIS gets \`ClientProxy.emit\` messages (a burst awaited together; with 4 subscribers each gets every message, counted once). 1 consumer: the systems take turns ${times(r.sizes.steadyRounds)} (the order rotates), medians shown; 4 consumers: one run. Throughput runs from the producer's first write to the last entry handled.`,
    '',
    '| steady state | fixed-rate p50 / p99 ms (1 consumer) | full speed msgs/s (1 / 4 consumers) | full speed × ref (1) | full speed runs msgs/s (1) | full speed p50 / p99 ms (1) | producer msgs/s at full speed (1) | backlog in Redis when the producer finished (1) | full speed peak RSS MB (1 / 4) |',
    '| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |',
    ...STEADY_SYSTEMS.map((s) => {
      const { fixed1, full1, full4 } = get(s);
      return line([
        get(s).system,
        lat(fixed1),
        full1 ? `${n(full1.msgsPerSec)} / ${n(full4?.msgsPerSec)}` : '—',
        x(full1?.msgsPerSec, refFull.value),
        full1?.runs.join(', ') ?? '—',
        lat(full1),
        n(full1?.producerMsgsPerSec),
        full1?.backlogAtProducerEnd === undefined ? '—' : n(full1.backlogAtProducerEnd),
        full1 ? `${n(full1.peakRssMb)} / ${n(full4?.peakRssMb)}` : '—',
      ]);
    }),
    '',
    `At full speed the producer writes as fast as it can on the same cores as the consumer and Redis. A consumer that keeps up shows its own latency; one that handles entries more slowly than the producer writes them falls behind, the entries wait in the stream (the backlog column: not yet delivered when the producer finished), and its full-speed p50 / p99 is the age of that backlog: it grows with the number of entries written, it is not a per-entry cost (docs/benchmarks.md, "Full speed: where entries wait"). Pub/sub delivered ${pubsub?.delivered ?? '—'} of ${pubsub?.sent ?? '—'} at full speed (no durability: a slow subscriber loses messages).`,
    '',
    `| nestjs-redis-streams | recovery of ${n(r.sizes.recovery)} pending ms (minIdleMs + blockMs) | self-drain after restart ms | SIGTERM → exit ms (parked / busy) |`,
    '| --- | ---: | ---: | ---: |',
    line([
      'nestjs-redis-streams',
      `${n(ours.recoveryMs)} (${n(r.recovery.floorMs)})`,
      n(ours.selfDrainMs),
      `${n(ours.shutdownParkedMs)} / ${n(ours.shutdownBusyMs)}`,
    ]),
    '',
    `Other NestJS Redis Streams transports, tried in this run: \`${r.otherTransports.search.command}\`: ${r.otherTransports.search.outcome}. Each candidate (from the search, or named in public docs and READMEs) was looked up with \`npm view <name> version\`, and each one the registry has was dry-run installed (\`npm install --dry-run --no-save\`) in a scratch folder pinning this project's Nest:`,
    '',
    ...r.otherTransports.attempts.map((a) => `- \`${a.name}\` (${a.from})${a.version ? ` ${a.version}` : ''}: ${a.outcome}`),
    '',
    '| per-entry costs (drain, no-op handler) | Redis round trips / 1,000 entries | Redis commands / 1,000 entries | bytes allocated / entry (sampled) | consumer CPU µs / entry |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...COST_SYSTEMS.map((s) => {
      const c = get(s).costs;
      return line([
        get(s).system,
        n(c?.roundTripsPer1k, 1),
        n(c?.commandsPer1k, 1),
        n(c?.bytesPerEntry),
        n(get(s).drain?.cpuUsPerEntry, 1),
      ]);
    }),
    '',
    `Round trips: every command the consumer's connections send on its own, plus one per pipeline (the child's XPENDING polls that detect the end are not counted). The read-ahead loop's reads and acks go out separately, so they count apart, but they overlap the handling instead of stalling it.`,
    '',
    '| concurrency (handler awaits 1 ms of I/O) | concurrency | msgs/s |',
    '| --- | ---: | ---: |',
    ...r.scaling.map((s) => `| ${s.system} | ${s.concurrency} | ${n(s.msgsPerSec)} |`),
    '',
    r.smoke
      ? 'Targets: not evaluated (smoke run: ratios at these sizes are not measurements).'
      : `Floors and targets: drain ${met(r.targets.drainVsReference, 0.68, 0.8)} the better expert loop (per-entry handler), ${met(r.targets.batchDrainVsReference, 0.8, 0.95)} it with a batch handler; full speed (1 consumer) ${r.targets.fullSpeedVsReference.toFixed(2)}× it; drain ${met(r.targets.drainVsBullmq, 3, 3)} BullMQ at concurrency 1.`,
    '',
    telemetryMarkdown(r.telemetry),
    '',
    retriesMarkdown(r.retries, SMOKE_NOTE),
    '',
    scaleMarkdown(r.scale, SMOKE_NOTE),
    '',
    orderedMarkdown(r.ordered, SMOKE_NOTE),
    '',
    flowMarkdown(r.flow, SMOKE_NOTE),
    '',
    schedulesMarkdown(r.schedules, SMOKE_NOTE),
    '',
    fairMarkdown(r.fair, SMOKE_NOTE),
    '',
    reclaimPathMarkdown(r.reclaimPath, SMOKE_NOTE),
    '',
    clusterMarkdown(r.cluster),
  ];
  return lines.filter((l, i, all) => !(l === '' && all[i - 1] === '')).join('\n');
}
