// npm run bench [-- --smoke] [-- --only cluster|telemetry]: every system on the same throwaway redis-server, in one run,
// reported as ratios to the raw ioredis loop measured in that same run; then the Redis Cluster section
// (bench/cluster.ts) on a throwaway local cluster. `--only cluster` runs that section alone and replaces it
// in the existing results file, keeping the rest. `--only telemetry` runs the OpenTelemetry cost section
// alone (results/telemetry.md).
import { Logger } from '@nestjs/common';
import { Queue } from 'bullmq';
import { ClientProxyFactory, Transport, type ClientProxy } from '@nestjs/microservices';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { startRedis } from '../test/support/redis-server.js';
import { benchCluster, CLUSTER_HEADING, clusterMarkdown, type ClusterSection } from './cluster.js';
import type { SystemName } from './systems.js';

// Nest's ClientRedis logs its connections on stdout, which carries the table.
Logger.overrideLogger(['error']);
const { values: flags } = parseArgs({ options: { smoke: { type: 'boolean', default: false }, only: { type: 'string' } } });
const smoke = flags.smoke;
if (flags.only !== undefined && flags.only !== 'cluster' && flags.only !== 'telemetry') throw new Error(`bench: --only takes "cluster" or "telemetry", got ${JSON.stringify(flags.only)}`);
const SIZE = {
  drain: smoke ? 2_000 : 100_000,
  drainRounds: smoke ? 1 : 5,
  profile: smoke ? 1_000 : 20_000,
  scaling: smoke ? 300 : 3_000,
  steadySeconds: smoke ? 1 : 4,
  offeredRate: 1_000,
  recovery: smoke ? 100 : 1_000,
};
const BATCH = 100;
const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));
const HIDE_OTEL = fileURLToPath(new URL('./hide-otel-api.mjs', pathToBench()));
const OTHER_TRANSPORTS_CHECKED = ['@tamimaj/nestjs-redis-streams', 'nestjs-redis-stream-microservice', '@stijlbreuk/nestjs-redis-streams-transport'];

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
if (flags.only === 'cluster') {
  log(`Redis Cluster section only; ${smoke ? 'SMOKE sizes' : 'full sizes'}`);
  const cluster = await benchCluster({ smoke, batchSize: BATCH, log });
  const markdown = clusterMarkdown(cluster);
  process.stdout.write(markdown + '\n');
  replaceClusterSection(cluster, markdown);
  process.exit(0);
}
const redis = await startRedis();
const admin = new Redis(redis.url);
const children = new Set<ChildProcess>();
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

interface Row {
  system: string;
  drain?: { msgsPerSec: number; cpuUsPerEntry: number; peakRssMb: number; runs: number[] };
  costs?: { roundTripsPer1k: number; commandsPer1k: number; bytesPerEntry?: number };
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
  /** The largest of the consumers' peak RSS. */
  peakRssMb: number;
  p50: number;
  p99: number;
  delivered: number;
  sent: number;
}

const rows = new Map<SystemName, Row>([
  ['raw-ioredis', { system: 'raw ioredis loop (reference)' }],
  ['nestjs-redis-streams', { system: 'nestjs-redis-streams' }],
  ['bullmq', { system: 'BullMQ Worker' }],
  ['nest-redis-pubsub', { system: 'Nest Transport.REDIS (pub/sub, fire-and-forget)' }],
]);
const row = (s: SystemName) => rows.get(s)!;
let uniq = 0;
// BullMQ refuses ':' in queue names.
const fresh = (what: string) => `bench-${what}-${++uniq}`;

// ---------------------------------------------------------------------------------------------
log(`redis-server ${redis.url}; ${smoke ? 'SMOKE sizes' : 'full sizes'}`);
if (flags.only === 'telemetry') {
  const markdown = telemetryMarkdown(await telemetryCost());
  process.stdout.write(markdown + '\n');
  writeFileSync(new URL(`./results/telemetry${smoke ? '-smoke' : ''}.md`, pathToBench()), `${markdown}\n`);
  admin.disconnect();
  await redis.stop();
  process.exit(0);
}
const ceiling = redisBenchmarkXadd();

// The raw loop and this transport take turns, DRAIN_ROUNDS times, and each reports its median:
// on a shared 2-core machine one run can be 30% off either way.
log('drain');
const drainRuns = new Map<SystemName, { msgsPerSec: number; cpuUsPerEntry: number; peakRssMb: number }[]>();
for (let round = 0; round < SIZE.drainRounds; round++) {
  for (const system of ['raw-ioredis', 'nestjs-redis-streams', ...(round === 0 ? (['bullmq'] as const) : [])] as const) {
    const key = fresh('drain');
    await preload(system, key, SIZE.drain);
    const result = await child({ mode: 'drain', system, key, n: SIZE.drain, batchSize: BATCH, concurrency: 1 });
    drainRuns.set(system, [...(drainRuns.get(system) ?? []), result]);
    log(`  ${system}: ${Math.round(result.msgsPerSec)} msgs/s, ${result.cpuUsPerEntry.toFixed(1)} µs CPU per entry`);
    await cleanup(system, key);
  }
}
for (const [system, runs] of drainRuns) {
  row(system).drain = {
    msgsPerSec: median(runs.map((r) => r.msgsPerSec)),
    cpuUsPerEntry: median(runs.map((r) => r.cpuUsPerEntry)),
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb)),
    runs: runs.map((r) => Math.round(r.msgsPerSec)),
  };
}

const telemetry = await telemetryCost();

log('per-entry costs');
for (const system of ['raw-ioredis', 'nestjs-redis-streams'] as const) {
  const key = fresh('costs');
  await preload(system, key, SIZE.profile);
  const result = await child({ mode: 'drain', system, key, n: SIZE.profile, batchSize: BATCH, concurrency: 1, profile: true });
  row(system).costs = { roundTripsPer1k: result.roundTripsPer1k, commandsPer1k: result.commandsPer1k, bytesPerEntry: result.bytesPerEntry };
  await cleanup(system, key);
}

log('concurrency scaling (handler awaits 1 ms of I/O)');
const scaling: { system: string; concurrency: number; msgsPerSec: number }[] = [];
for (const [system, concurrency] of [
  ['raw-ioredis', 1],
  ['nestjs-redis-streams', 1],
  ['nestjs-redis-streams', 4],
  ['nestjs-redis-streams', 16],
  ['nestjs-redis-streams', 64],
  ['bullmq', 1],
  ['bullmq', 16],
] as const) {
  const key = fresh('scaling');
  await preload(system, key, SIZE.scaling);
  const result = await child({ mode: 'drain', system, key, n: SIZE.scaling, batchSize: BATCH, concurrency, ioMs: 1 });
  scaling.push({ system, concurrency, msgsPerSec: result.msgsPerSec });
  log(`  ${system} x${concurrency}: ${Math.round(result.msgsPerSec)} msgs/s`);
  await cleanup(system, key);
}

log('steady state (end-to-end latency from append to handler)');
for (const system of ['raw-ioredis', 'nestjs-redis-streams', 'bullmq', 'nest-redis-pubsub'] as const) {
  row(system).fixed1 = await steady(system, 1, SIZE.offeredRate);
  row(system).full1 = await steady(system, 1, undefined);
  row(system).full4 = await steady(system, 4, undefined);
  log(`  ${system}: full speed ${Math.round(row(system).full1!.msgsPerSec)} msgs/s (1 consumer), ${Math.round(row(system).full4!.msgsPerSec)} (4)`);
}

log('recovery and shutdown (nestjs-redis-streams)');
const minIdleMs = 2000;
const blockMs = 500;
row('nestjs-redis-streams').recoveryMs = await recovery('peer');
row('nestjs-redis-streams').selfDrainMs = await recovery('self');
row('nestjs-redis-streams').shutdownParkedMs = await shutdown(false);
row('nestjs-redis-streams').shutdownBusyMs = await shutdown(true);

log('Redis Cluster: one logical stream, 1 vs 6 partitions, 1 and 3 consumer processes (local 3-master cluster)');
const cluster = await benchCluster({ smoke, batchSize: BATCH, log });

// ---------------------------------------------------------------------------------------------
const raw = row('raw-ioredis');
const ours = row('nestjs-redis-streams');
const bull = row('bullmq');
const targets = {
  drainVsRaw: ours.drain!.msgsPerSec / raw.drain!.msgsPerSec,
  drainVsBullmq: ours.drain!.msgsPerSec / bull.drain!.msgsPerSec,
};
const machine = `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${execFileSync('redis-server', ['--version']).toString().split(' ')[2]?.replace('v=', 'Redis ')}`;
const result = {
  date: new Date().toISOString(),
  smoke,
  machine,
  sizes: SIZE,
  batchSize: BATCH,
  ceiling,
  rows: [...rows.values()],
  scaling,
  recovery: { minIdleMs, blockMs, floorMs: minIdleMs + blockMs },
  targets,
  otherTransportsChecked: OTHER_TRANSPORTS_CHECKED,
  telemetry,
  cluster,
};
const markdown = toMarkdown(result);
process.stdout.write(markdown + '\n');
mkdirSync(new URL('./results/', pathToBench()), { recursive: true });
const base = smoke ? 'smoke' : 'latest';
writeFileSync(new URL(`./results/${base}.json`, pathToBench()), JSON.stringify(result, null, 2) + '\n');
writeFileSync(new URL(`./results/${base}.md`, pathToBench()), markdown + '\n');
admin.disconnect();
await redis.stop();
process.exit(0);

// ---------------------------------------------------------------------------------------------

type TelemetryVariant = 'no API' | 'API, telemetry: false' | 'API, no SDK' | 'API + SDK';
interface TelemetryCost {
  n: number;
  rounds: number;
  /** Median drain msgs/s and CPU µs per entry of each variant, and every run's msgs/s. */
  variants: { variant: TelemetryVariant; msgsPerSec: number; cpuUsPerEntry: number; runs: number[] }[];
}

/**
 * What OpenTelemetry costs the drain: without `@opentelemetry/api` (hidden from the child), with
 * it but no SDK (the nil-cost promise), and with an SDK recording spans and metrics. The three
 * take turns, round after round, and report medians.
 */
async function telemetryCost(): Promise<TelemetryCost> {
  log('OpenTelemetry cost (nestjs-redis-streams drain: no API / API, telemetry off / API without SDK / API + SDK)');
  const variants: TelemetryVariant[] = ['no API', 'API, telemetry: false', 'API, no SDK', 'API + SDK'];
  const runs = new Map<TelemetryVariant, { msgsPerSec: number; cpuUsPerEntry: number }[]>();
  for (let round = 0; round < SIZE.drainRounds; round++) {
    // A different variant goes first each round: no variant gets the machine's warmest or coldest slot every time.
    for (const variant of [...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)]) {
      const key = fresh('otel');
      await preload('nestjs-redis-streams', key, SIZE.drain);
      const result = await child({ mode: 'drain', system: 'nestjs-redis-streams', key, n: SIZE.drain, batchSize: BATCH, concurrency: 1, hideOtel: variant === 'no API', otelSdk: variant === 'API + SDK', ...(variant === 'API, telemetry: false' ? { telemetry: false } : {}) });
      // The variant must be what it claims: the hook really hid the API, or it really was there.
      if (result.otelApi !== (variant !== 'no API')) throw new Error(`bench: variant "${variant}" ran with @opentelemetry/api ${result.otelApi ? 'present' : 'absent'}`);
      runs.set(variant, [...(runs.get(variant) ?? []), result]);
      log(`  ${variant}: ${Math.round(result.msgsPerSec)} msgs/s, ${result.cpuUsPerEntry.toFixed(1)} µs CPU per entry`);
      await cleanup('nestjs-redis-streams', key);
    }
  }
  return {
    n: SIZE.drain,
    rounds: SIZE.drainRounds,
    variants: variants.map((variant) => {
      const r = runs.get(variant)!;
      return { variant, msgsPerSec: median(r.map((x) => x.msgsPerSec)), cpuUsPerEntry: median(r.map((x) => x.cpuUsPerEntry)), runs: r.map((x) => Math.round(x.msgsPerSec)) };
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
    ...t.variants.map((v) => `| ${v.variant} | ${Math.round(v.msgsPerSec).toLocaleString('en-US')} | ${(v.msgsPerSec / base.msgsPerSec).toFixed(2)}× | ${v.cpuUsPerEntry.toFixed(1)} | ${v.runs.join(', ')} |`),
  ].join('\n');
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

async function cleanup(system: SystemName, key: string): Promise<void> {
  if (system === 'bullmq') {
    const queue = new Queue(key, { connection: { url: redis.url } });
    await queue.obliterate({ force: true });
    await queue.close();
  } else {
    await admin.del(key);
  }
}

/** Runs the child to completion and returns its last JSON line. */
async function child(args: Record<string, unknown>): Promise<any> {
  const proc = spawnChild({ group: 'bench', consumer: 'c1', url: redis.url, ...args });
  let last: any;
  for await (const line of createInterface({ input: proc.stdout! })) last = JSON.parse(line);
  if (proc.exitCode !== 0 && proc.exitCode !== null) throw new Error(`bench child failed: ${JSON.stringify(args)}`);
  return last;
}

function spawnChild(args: Record<string, unknown>): ChildProcess {
  const proc = spawn(process.execPath, [...(args.hideOtel ? ['--import', HIDE_OTEL] : []), CHILD, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

/** k consumers; a producer at `rate` msgs/s (or as fast as it can) for the steady window; latencies merged. */
async function steady(system: SystemName, k: number, rate: number | undefined): Promise<Latency> {
  const key = fresh('steady');
  if (system !== 'bullmq' && system !== 'nest-redis-pubsub') await admin.xgroup('CREATE', key, 'bench', '$', 'MKSTREAM');
  const consumers = Array.from({ length: k }, (_, i) => {
    const proc = spawnChild({ mode: 'consume', system, key, url: redis.url, group: 'bench', consumer: `c${i}`, batchSize: BATCH, concurrency: 1 });
    const lines = createInterface({ input: proc.stdout! });
    const state = { proc, ready: false, progress: 0, report: undefined as undefined | { latencies: number[]; last: number; peakRssMb: number } };
    lines.on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.ready) state.ready = true;
      if (msg.progress !== undefined) state.progress = msg.progress;
      if (msg.latencies) state.report = msg;
    });
    return state;
  });
  await until(() => consumers.every((c) => c.ready), 20_000, 'consumers ready');
  const send = await producer(system, key);
  const start = performance.timeOrigin + performance.now();
  let sent = 0;
  const end = Date.now() + SIZE.steadySeconds * 1000;
  while (Date.now() < end) {
    const burst = rate === undefined ? BATCH : Math.max(1, Math.round(rate / 100));
    await send.batch(burst);
    sent += burst;
    if (rate !== undefined) await sleep(10);
  }
  // Durable systems get everything; pub/sub may drop: wait for silence instead.
  let last = -1;
  await until(
    () => {
      const total = consumers.reduce((s, c) => s + c.progress, 0);
      const quiet = total === last;
      last = total;
      return total >= sent || (system === 'nest-redis-pubsub' && quiet);
    },
    60_000,
    'consumers to catch up',
    200,
  );
  for (const c of consumers) c.proc.stdin!.write('report\n');
  await until(() => consumers.every((c) => c.report), 20_000, 'reports');
  await send.close();
  const latencies = consumers.flatMap((c) => c.report!.latencies).sort((a, b) => a - b);
  const finished = Math.max(...consumers.map((c) => c.report!.last));
  if (system !== 'bullmq' && system !== 'nest-redis-pubsub') await admin.del(key);
  else if (system === 'bullmq') await cleanup('bullmq', key);
  return {
    msgsPerSec: (latencies.length / (finished - start)) * 1000,
    peakRssMb: Math.max(...consumers.map((c) => c.report!.peakRssMb)),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    delivered: latencies.length,
    sent,
  };
}

async function producer(system: SystemName, key: string): Promise<{ batch(n: number): Promise<void>; close(): Promise<void> }> {
  const t = () => String(performance.timeOrigin + performance.now());
  if (system === 'bullmq') {
    const queue = new Queue(key, { connection: { url: redis.url } });
    return {
      batch: async (n) => void (await queue.addBulk(Array.from({ length: n }, () => ({ name: 'job', data: { t: t() } })))),
      close: () => queue.close(),
    };
  }
  if (system === 'nest-redis-pubsub') {
    const { hostname, port } = new URL(redis.url);
    const client: ClientProxy = ClientProxyFactory.create({ transport: Transport.REDIS, options: { host: hostname, port: Number(port) } });
    await client.connect();
    return {
      batch: async (n) => void (await Promise.all(Array.from({ length: n }, () => lastValueFrom(client.emit(key, { t: t() }), { defaultValue: undefined })))),
      close: async () => void (await client.close()),
    };
  }
  return {
    batch: async (n) => {
      const p = admin.pipeline();
      for (let i = 0; i < n; i++) p.xadd(key, '*', 't', t());
      await p.exec();
    },
    close: async () => {},
  };
}

/** A consumer holding `SIZE.recovery` pending entries is SIGKILLed; a peer (or itself, restarted) settles them. */
async function recovery(kind: 'peer' | 'self'): Promise<number> {
  const key = fresh('recovery');
  await preload('raw-ioredis', key, SIZE.recovery);
  // The victim takes every entry and dies holding them.
  const holder = new Redis(redis.url);
  await holder.xreadgroup('GROUP', 'bench', 'victim', 'COUNT', SIZE.recovery, 'STREAMS', key, '>');
  holder.disconnect();
  const killedAt = performance.now();
  const consumer = kind === 'peer' ? 'peer' : 'victim';
  const proc = spawnChild({ mode: 'consume', system: 'nestjs-redis-streams', key, url: redis.url, group: 'bench', consumer, batchSize: BATCH, concurrency: 1, blockMs, minIdleMs: kind === 'peer' ? minIdleMs : 600_000 });
  proc.stdout!.resume();
  await until(async () => Number(((await admin.xpending(key, 'bench')) as [number])[0]) === 0, 60_000, `${kind} recovery`, 10);
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
  const proc = spawnChild({ mode: 'consume', system: 'nestjs-redis-streams', key, url: redis.url, group: 'bench', consumer: 'c', batchSize: BATCH, concurrency: 1, blockMs: 5000, ioMs: busy ? 200 : 0 });
  let ready = false;
  let progress = 0;
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const msg = JSON.parse(line);
    if (msg.ready) ready = true;
    if (msg.progress !== undefined) progress = msg.progress;
  });
  await until(() => ready, 20_000, 'consumer ready');
  if (busy) {
    await admin.xadd(key, '*', 't', String(performance.timeOrigin + performance.now()));
    await until(() => progress > 0, 10_000, 'handler in hand');
  } else {
    await sleep(300); // let it park
  }
  const start = performance.now();
  proc.kill('SIGTERM');
  await new Promise((resolve) => proc.once('exit', resolve));
  await admin.del(key);
  return performance.now() - start;
}

function redisBenchmarkXadd(): { msgsPerSec: number; command: string } | undefined {
  const args = ['-h', '127.0.0.1', '-p', String(redis.port), '-n', smoke ? '20000' : '200000', '-c', '50', '-P', '16', '-q', 'XADD', 'bench:ceiling', 'MAXLEN', '~', '100000', '*', 'n', '1'];
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

async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 0.5);
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function toMarkdown(r: typeof result): string {
  const n = (v: number | undefined, digits = 0) => (v === undefined || Number.isNaN(v) ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));
  const x = (v: number | undefined, ref: number | undefined) => (v === undefined || ref === undefined ? '—' : `${(v / ref).toFixed(2)}×`);
  const lat = (l: Latency | undefined) => (l ? `${n(l.p50, 1)} / ${n(l.p99, 1)}` : '—');
  const rawDrain = raw.drain?.msgsPerSec;
  const rawFull = raw.full1?.msgsPerSec;
  const lines = [
    `Benchmark ${r.smoke ? '(smoke sizes, not for quoting) ' : ''}— ${r.date}`,
    `Machine: ${r.machine}. Drain: ${n(r.sizes.drain)} preloaded entries, batch ${r.batchSize}, no-op handler; raw loop and nestjs-redis-streams take turns ${r.sizes.drainRounds} times, medians shown (runs: raw ${raw.drain?.runs.join(', ')}; ours ${ours.drain?.runs.join(', ')}). Steady: ${r.sizes.steadySeconds} s windows, fixed rate ${n(r.sizes.offeredRate)} msgs/s or full speed.`,
    '',
    '| system | drain msgs/s | drain × raw | drain peak RSS MB | fixed-rate p50 / p99 ms (1 consumer) | full speed msgs/s (1 / 4 consumers) | full speed × raw (1) | full speed p50 / p99 ms (1) | full speed peak RSS MB (1 / 4) | recovery of 1,000 pending ms (minIdleMs + blockMs) | self-drain after restart ms | SIGTERM → exit ms (parked / busy) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...r.rows.map((row) =>
      [
        row.system,
        n(row.drain?.msgsPerSec),
        x(row.drain?.msgsPerSec, rawDrain),
        n(row.drain?.peakRssMb),
        lat(row.fixed1),
        row.full1 ? `${n(row.full1.msgsPerSec)} / ${n(row.full4?.msgsPerSec)}` : '—',
        x(row.full1?.msgsPerSec, rawFull),
        lat(row.full1),
        row.full1 ? `${n(row.full1.peakRssMb)} / ${n(row.full4?.peakRssMb)}` : '—',
        row.recoveryMs === undefined ? '—' : `${n(row.recoveryMs)} (${n(r.recovery.floorMs)})`,
        n(row.selfDrainMs),
        row.shutdownParkedMs === undefined ? '—' : `${n(row.shutdownParkedMs)} / ${n(row.shutdownBusyMs)}`,
      ].join(' | ').replace(/^/, '| ').replace(/$/, ' |'),
    ),
    r.ceiling ? `| redis-benchmark XADD (server ceiling, -P 16 -c 50) | ${n(r.ceiling.msgsPerSec)} | ${x(r.ceiling.msgsPerSec, rawDrain)} | — | — | — | — | — | — | — | — | — |` : '',
    '',
    `Pub/sub delivered ${r.rows.find((x) => x.system.startsWith('Nest Transport'))?.full1?.delivered ?? '—'} of ${r.rows.find((x) => x.system.startsWith('Nest Transport'))?.full1?.sent ?? '—'} at full speed (no durability). Other NestJS Redis Streams transports: none installable from this registry (checked: ${r.otherTransportsChecked.join(', ')}).`,
    '',
    '| per-entry costs (drain, no-op handler) | Redis round trips / 1,000 entries | Redis commands / 1,000 entries | bytes allocated / entry (sampled) | consumer CPU µs / entry |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...r.rows
      .filter((row) => row.costs)
      .map((row) => `| ${row.system} | ${n(row.costs!.roundTripsPer1k, 1)} | ${n(row.costs!.commandsPer1k, 1)} | ${n(row.costs!.bytesPerEntry)} | ${n(row.drain?.cpuUsPerEntry, 1)} |`),
    '',
    '| concurrency (handler awaits 1 ms of I/O) | concurrency | msgs/s |',
    '| --- | ---: | ---: |',
    ...r.scaling.map((s) => `| ${s.system} | ${s.concurrency} | ${n(s.msgsPerSec)} |`),
    '',
    `Targets: drain ${targets.drainVsRaw.toFixed(2)}× the raw loop (floor 0.8×), ${targets.drainVsBullmq.toFixed(2)}× BullMQ at concurrency 1 (floor 3×).`,
    '',
    telemetryMarkdown(r.telemetry),
    '',
    clusterMarkdown(r.cluster),
  ];
  return lines.filter((l, i, all) => !(l === '' && all[i - 1] === '')).join('\n');
}
