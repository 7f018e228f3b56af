// The repeatable-schedules section of `npm run bench` (`--only schedules` alone): what a fire costs and how late it is.
// - `schedules` schedules of one stream, each `every: 1000` (all on the same second boundaries: the worst case, every
//   fire of a second at once), fired and handled (a no-op handler) by one StreamConsumer with the default options
//   (flowCheckMs 1000) in this process, for `seconds` after a warm-up. Per fire: the lateness on Redis' clock (the
//   entry's stream id time − its fire time, both Redis': exact), this process' CPU (process.cpuUsage: the firer, the
//   promoter's looks and the consumer's reads and acks; nothing else runs here meanwhile) and Redis' CPU (INFO cpu,
//   used_cpu_user + used_cpu_sys) per fire.
// - The reference, in the same run: the same consumer fed the same number of plain entries a second (one pipelined
//   burst of XADDs per second, its own CPU taken out), per entry the same two CPU figures. The ratio says what firing
//   adds to consuming an entry.
// Nothing asserts a time; `problems` lists runs that fired one time twice, one early, or lost fires.
import { Redis } from 'ioredis';
import { Schedules } from 'nestjs-redis-streams';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { waitFor } from '../test/support/wait-for.js';
import type { Distribution } from './flow.js';

type Log = (line: string) => void;

export const scheduleSizes = (smoke: boolean) => ({
  schedules: smoke ? 200 : 10_000,
  seconds: smoke ? 3 : 10,
  warmupSeconds: smoke ? 2 : 3,
});

export interface SchedulesSection {
  smoke: boolean;
  sizes: ReturnType<typeof scheduleSizes>;
  fires: number;
  lateness: Distribution;
  /** Per fire: this process' CPU (µs) and Redis' (µs). */
  workerUsPerFire: number;
  redisUsPerFire: number;
  /** The reference: per plain entry consumed, the same two. */
  plain: { entries: number; workerUsPerEntry: number; redisUsPerEntry: number };
  problems: string[];
}

const distribution = (values: number[]): Distribution => {
  const s = [...values].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
  return { count: s.length, p50: at(0.5), p99: at(0.99), max: s.at(-1) ?? NaN, min: s[0] ?? NaN };
};

async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const get = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (get('used_cpu_user') + get('used_cpu_sys')) * 1e6;
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms)); // a measuring window, not a wait for a condition

export async function benchSchedules({ smoke, url, log }: { smoke: boolean; url: string; log: Log }): Promise<SchedulesSection> {
  const sizes = scheduleSizes(smoke);
  const admin = new Redis(url);
  const problems: string[] = [];
  const prefix = `bench-sched-${Date.now()}:`;
  const stream = `${prefix}ticks`;
  let handled = 0;
  const consumer = new StreamConsumer({
    connection: url,
    keyPrefix: prefix,
    group: 'g',
    consumer: 'c1',
    logger: false,
    concurrency: 10,
    batchSize: 100,
  });
  consumer.handle('ticks', () => void handled++);
  await consumer.start();

  // Schedules: set, then a warm-up, then the window.
  log(`schedules: setting ${sizes.schedules} schedules (every 1000 ms)`);
  const schedules = new Schedules(admin);
  for (let i = 0; i < sizes.schedules; i += 500)
    await Promise.all(
      Array.from({ length: Math.min(500, sizes.schedules - i) }, (_, k) =>
        schedules.set(stream, `s${i + k}`, { every: 1000, payload: { n: i + k } }),
      ),
    );
  await sleep(sizes.warmupSeconds * 1000);
  const from = await admin.xlen(stream);
  const lastIdBefore = ((await admin.xrevrange(stream, '+', '-', 'COUNT', 1)) as [string, string[]][])[0]?.[0] ?? '0-0';
  const [cpu0, redis0] = [cpuUs(), await redisCpuUs(admin)];
  log(`schedules: measuring ${sizes.seconds} s`);
  await sleep(sizes.seconds * 1000);
  const [cpu1, redis1] = [cpuUs(), await redisCpuUs(admin)];
  const to = await admin.xlen(stream);
  const fires = to - from;
  // Stop firing, then read what the window fired.
  for (let i = 0; i < sizes.schedules; i += 500)
    await Promise.all(Array.from({ length: Math.min(500, sizes.schedules - i) }, (_, k) => schedules.remove(stream, `s${i + k}`)));
  const lateness: number[] = [];
  const seen = new Set<string>();
  let cursor = `(${lastIdBefore}`;
  for (;;) {
    const rows = (await admin.xrange(stream, cursor, '+', 'COUNT', 5000)) as [string, string[]][];
    if (rows.length === 0) break;
    for (const [id, f] of rows) {
      const at = Number(f[f.indexOf('fireTime') + 1]);
      const key = `${f[f.indexOf('scheduleId') + 1]}@${at}`;
      if (seen.has(key)) problems.push(`${key} fired twice`);
      seen.add(key);
      const late = Number(id.split('-')[0]) - at;
      if (late < 0) problems.push(`${key} went in ${-late} ms early`);
      lateness.push(late);
    }
    cursor = `(${rows.at(-1)![0]}`;
  }
  // Every schedule fires once a second: the window holds about schedules × seconds fires.
  const expected = sizes.schedules * sizes.seconds;
  if (fires < expected * 0.9) problems.push(`${fires} fires in ${sizes.seconds} s, expected about ${expected}`);
  await waitFor(() => handled >= to, { message: 'every fire handled', timeoutMs: 60_000 });

  // The reference: the same consumer, plain entries at the same rate.
  log(`schedules: the reference, ${sizes.schedules} plain entries a second`);
  const plainStream = `${prefix}plain`;
  let plainHandled = 0;
  const plainConsumer = new StreamConsumer({
    connection: url,
    keyPrefix: prefix,
    group: 'g',
    consumer: 'c2',
    logger: false,
    concurrency: 10,
    batchSize: 100,
  });
  plainConsumer.handle('plain', () => void plainHandled++);
  await plainConsumer.start();
  const burst = async () => {
    const pipeline = admin.pipeline();
    for (let i = 0; i < sizes.schedules; i++) pipeline.xadd(plainStream, '*', 'data', `{"n":${i}}`);
    await pipeline.exec();
  };
  await burst();
  await waitFor(() => plainHandled >= sizes.schedules, { message: 'the first burst handled', timeoutMs: 60_000 });
  const [pcpu0, predis0] = [cpuUs(), await redisCpuUs(admin)];
  let producerUs = 0;
  const before = plainHandled;
  for (let s = 0; s < sizes.seconds; s++) {
    const started = performance.now();
    const c = cpuUs();
    await burst();
    producerUs += cpuUs() - c;
    await sleep(Math.max(0, 1000 - (performance.now() - started)));
  }
  await waitFor(() => plainHandled >= before + sizes.schedules * sizes.seconds, {
    message: 'every plain entry handled',
    timeoutMs: 60_000,
  });
  const [pcpu1, predis1] = [cpuUs(), await redisCpuUs(admin)];
  const entries = plainHandled - before;
  await consumer.close();
  await plainConsumer.close();
  admin.disconnect();
  // The XADDs' own Redis time counts for plain entries as the fire script's does for fires: both are how the entry got there.
  return {
    smoke,
    sizes,
    fires,
    lateness: distribution(lateness),
    workerUsPerFire: (cpu1 - cpu0) / fires,
    redisUsPerFire: (redis1 - redis0) / fires,
    plain: { entries, workerUsPerEntry: (pcpu1 - pcpu0 - producerUs) / entries, redisUsPerEntry: (predis1 - predis0) / entries },
    problems,
  };
}

export function schedulesMarkdown(r: SchedulesSection, smokeNote: string): string {
  const f = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-');
  return `## Repeatable schedules

${r.smoke ? `${smokeNote}\n\n` : ''}${r.sizes.schedules} schedules of one stream, each every 1,000 ms (all on the same second boundaries), fired and
handled (no-op) by one StreamConsumer (flowCheckMs 1000, concurrency 10, batchSize 100); ${r.sizes.seconds} s measured after a
${r.sizes.warmupSeconds} s warm-up: ${r.fires} fires. Lateness on Redis' clock (the entry's stream id − its fire time; never negative: none early).

| | per fire (schedules) | per entry (plain XADD, the reference) | ratio |
| --- | --- | --- | --- |
| worker CPU, µs | ${f(r.workerUsPerFire)} | ${f(r.plain.workerUsPerEntry)} | ${f(r.workerUsPerFire / r.plain.workerUsPerEntry)}× |
| Redis CPU, µs | ${f(r.redisUsPerFire)} | ${f(r.plain.redisUsPerEntry)} | ${f(r.redisUsPerFire / r.plain.redisUsPerEntry)}× |

| lateness, ms | p50 | p99 | max |
| --- | --- | --- | --- |
| ${r.lateness.count} fires | ${r.lateness.p50} | ${r.lateness.p99} | ${r.lateness.max} |
${r.problems.length > 0 ? `\nProblems: ${r.problems.slice(0, 10).join('; ')}\n` : ''}`;
}
