// Where do entries queue at full speed (or at `--rate`)? One consumer process (bench/child.ts, consume mode, with
// `stages`: each entry's XREADGROUP reply timed as it reaches JavaScript) and the bench's producer
// process (bench/producer.ts, full speed, bursts of 100) on a throwaway redis-server, for each
// variant given; the variants take turns `--rounds` times. Per entry, end-to-end latency splits into
// producer → reply in JavaScript (waiting in the stream, in Redis, in the socket) and reply in
// JavaScript → handler (waiting inside the consumer behind the entries read before it).
//
//   npm run build && npx tsc -p bench/tsconfig.json && node dist/bench-build/bench/latency-probe.js [--n 100000] [--rounds 3] [--rate msgs/s] [--variants 0,2]
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { parseInfo } from '../test/support/redis-info.js';
import { startRedis } from '../test/support/redis-server.js';
import { waitFor } from '../test/support/wait-for.js';
import { shutdownRedis } from './shutdown-redis.js';
import type { ProducerSummary } from './producer.js';
import type { ConsumerOptions, SystemName } from './systems.js';

const { values: flags } = parseArgs({
  options: {
    n: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '3' },
    rate: { type: 'string' },
    variants: { type: 'string' },
  },
});
const N = Number(flags.n);
const ROUNDS = Number(flags.rounds);
const RATE = flags.rate === undefined ? undefined : Number(flags.rate);
const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));
const PRODUCER = fileURLToPath(new URL('./producer.js', import.meta.url));

interface Variant {
  label: string;
  system: SystemName;
  options?: Partial<ConsumerOptions>;
}
const ALL: Variant[] = [
  { label: 'expert-pipelined', system: 'expert-pipelined' },
  { label: 'expert-readahead', system: 'expert-readahead' },
  { label: 'nestjs-redis-streams (defaults of the bench: batch 100, readAhead, blockMs 1000)', system: 'nestjs-redis-streams' },
  { label: 'nestjs-redis-streams readAhead: false', system: 'nestjs-redis-streams', options: { readAhead: false } },
  { label: 'nestjs-redis-streams batchSize 10', system: 'nestjs-redis-streams', options: { batchSize: 10 } },
  { label: 'nestjs-redis-streams blockMs 100', system: 'nestjs-redis-streams', options: { blockMs: 100 } },
];
const r0 = (v: number) => Math.round(v).toLocaleString('en-US');
const r1 = (v: number) => v.toFixed(1);
const variants = flags.variants ? flags.variants.split(',').map((i) => ALL[Number(i)]!) : ALL;

const redis = await startRedis();
const admin = new Redis(redis.url);
const procs = new Set<ChildProcess>();
let redisStopped = false;
process.on('exit', () => {
  procs.forEach((p) => p.kill('SIGKILL'));
  // A probe that failed midway must not leave its redis-server behind.
  if (!redisStopped) shutdownRedis(redis.port);
});
const log = (line: string) => process.stderr.write(`probe: ${line}\n`);

const results = new Map<string, Run[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const v of [...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)]) {
    const run = await once(v, `probe-${round}-${v.system}-${Math.random().toString(36).slice(2)}`);
    results.set(v.label, [...(results.get(v.label) ?? []), run]);
    log(`${v.label}: ${fmt(run)}`);
  }
}
process.stdout.write(
  `\n${RATE === undefined ? 'Full speed' : `${RATE.toLocaleString('en-US')} msgs/s`}, ${N.toLocaleString('en-US')} entries, 1 consumer, medians of ${ROUNDS} rounds (ms):\n\n`,
);
process.stdout.write(
  '| variant | producer msgs/s | consumer msgs/s | p50 / p99 end to end | p50 / p99 producer → reply in JS | p50 / p99 reply in JS → handler | entries per read (mean) | full reads | backlog at producer end | CPU µs / entry: consumer / producer / redis |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n',
);
for (const [label, runs] of results) {
  const m = (f: (r: Run) => number) => median(runs.map(f));
  process.stdout.write(
    `| ${label} | ${r0(m((r) => r.producerRate))} | ${r0(m((r) => r.consumerRate))} | ${r1(m((r) => r.p50))} / ${r1(m((r) => r.p99))} | ${r1(m((r) => r.readP50))} / ${r1(m((r) => r.readP99))} | ${r1(m((r) => r.inP50))} / ${r1(m((r) => r.inP99))} | ${r1(m((r) => r.meanRead))} | ${Math.round(m((r) => r.fullReads) * 100)}% | ${r0(m((r) => r.backlogAtEnd))} | ${r1(m((r) => r.consumerCpu))} / ${r1(m((r) => r.producerCpu))} / ${r1(m((r) => r.redisCpu))} |\n`,
  );
}
admin.disconnect();
await redis.stop();
redisStopped = true;
process.exit(0);

interface Run {
  producerRate: number;
  consumerRate: number;
  p50: number;
  p99: number;
  readP50: number;
  readP99: number;
  inP50: number;
  inP99: number;
  meanRead: number;
  fullReads: number;
  backlogAtEnd: number;
  /** CPU µs per entry: the consumer (from its first entry), the producer, redis-server (INFO CPU, go → all handled). */
  consumerCpu: number;
  producerCpu: number;
  redisCpu: number;
}

async function once(v: Variant, key: string): Promise<Run> {
  const batchSize = v.options?.batchSize ?? 100;
  await admin.xgroup('CREATE', key, 'bench', '$', 'MKSTREAM');
  const consumer = start(CHILD, {
    mode: 'consume',
    system: v.system,
    key,
    url: redis.url,
    group: 'bench',
    consumer: 'c0',
    batchSize,
    concurrency: 1,
    stages: true,
    ...v.options,
  });
  let progress = 0;
  let report: { latencies: number[]; last: number; cpuUs: number; stages: [number, number][]; reads: number[] } | undefined;
  consumer.on('line', (msg) => {
    if (msg.progress !== undefined) progress = msg.progress;
    if (msg.latencies) report = msg;
  });
  await consumer.when((msg) => msg.ready);
  const producer = start(PRODUCER, {
    url: redis.url,
    kind: 'stream',
    key,
    n: N,
    burst: 100,
    ...(RATE === undefined ? {} : { rate: RATE }),
  });
  await producer.when((msg) => msg.ready);
  const redisCpu = async () => {
    const info = parseInfo(await admin.info('cpu'));
    return (Number(info.used_cpu_sys) + Number(info.used_cpu_user)) * 1e6;
  };
  const cpuAtGo = await redisCpu();
  producer.proc.stdin!.write('go\n');
  const summary = (await producer.when((msg) => msg.sent !== undefined)) as ProducerSummary;
  // Entries in the stream not yet delivered to the group when the producer is done (XINFO GROUPS lag, Redis 7).
  const groups = (await admin.xinfo('GROUPS', key)) as unknown[][];
  const fields = groups[0]!;
  const backlogAtEnd = Number(fields[fields.indexOf('lag') + 1]);
  await waitFor(() => progress >= summary.sent, { timeoutMs: 120_000, message: 'probe: every sent entry handled' });
  const redisCpuUs = (await redisCpu()) - cpuAtGo;
  consumer.proc.stdin!.write('report\n');
  await waitFor(() => report !== undefined, { timeoutMs: 120_000, message: 'probe: the consumer report' });
  await admin.del(key);
  const r = report!;
  const lat = [...r.latencies].sort((a, b) => a - b);
  const read = r.stages.map((s) => s[0]).sort((a, b) => a - b);
  const inside = r.stages.map((s) => s[1]).sort((a, b) => a - b);
  const nonEmpty = r.reads.filter((c) => c > 0);
  return {
    producerRate: (summary.sent / (summary.lastAt - summary.firstAt)) * 1000,
    consumerRate: (lat.length / (r.last - summary.firstAt)) * 1000,
    p50: pct(lat, 0.5),
    p99: pct(lat, 0.99),
    readP50: pct(read, 0.5),
    readP99: pct(read, 0.99),
    inP50: pct(inside, 0.5),
    inP99: pct(inside, 0.99),
    meanRead: nonEmpty.reduce((a, b) => a + b, 0) / nonEmpty.length,
    fullReads: nonEmpty.filter((c) => c >= batchSize).length / nonEmpty.length,
    backlogAtEnd,
    consumerCpu: r.cpuUs / lat.length,
    producerCpu: summary.cpuUs / summary.sent,
    redisCpu: redisCpuUs / summary.sent,
  };
}

function start(file: string, args: Record<string, unknown>) {
  const proc = spawn(process.execPath, [file, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
  procs.add(proc);
  proc.once('exit', () => procs.delete(proc));
  const listeners = new Set<(msg: any) => void>();
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const msg = JSON.parse(line);
    for (const l of listeners) l(msg);
  });
  return {
    proc,
    on: (_: 'line', l: (msg: any) => void) => void listeners.add(l),
    when: (test: (msg: any) => boolean) =>
      new Promise<any>((resolve) => {
        const l = (msg: any) => test(msg) && (listeners.delete(l), resolve(msg));
        listeners.add(l);
      }),
  };
}

function pct(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
function median(values: number[]): number {
  return pct(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}
function fmt(r: Run): string {
  return `producer ${r0(r.producerRate)}/s, consumer ${r0(r.consumerRate)}/s, p50 ${r1(r.p50)} p99 ${r1(r.p99)}; read ${r1(r.readP50)}/${r1(r.readP99)}, inside ${r1(r.inP50)}/${r1(r.inP99)}; ${r1(r.meanRead)} per read, ${Math.round(r.fullReads * 100)}% full; backlog at end ${r0(r.backlogAtEnd)}; CPU µs/entry consumer ${r1(r.consumerCpu)} producer ${r1(r.producerCpu)} redis ${r1(r.redisCpu)}`;
}
