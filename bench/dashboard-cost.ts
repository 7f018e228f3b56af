// npm run bench:dashboard [-- --smoke]: what one dashboard refresh costs Redis, on one throwaway redis-server:
// STREAMS streams with a group each (the overview reads one page of them), and one stream whose PEL holds
// PEL entries (its stream page and a PEL page). Each figure: the call's time, Redis' CPU for it (INFO cpu)
// and its commands, against `redis-streams inspect`'s reading of the same page (inspectStreams), measured here.
// Then the charts' history (figure-history.ts): one round of its sampler at its default cap (1,000 streams) and
// with every stream (10,000), and the memory its rings take at 10,000 streams.
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { serveDashboard } from 'nestjs-redis-streams';
import { startRedis } from '../test/support/redis-server.js';

// The CLI's own reading (not exported by the package): from the built library, beside this compiled script.
const { inspectStreams } = (await import(new URL('../../../libs/redis-streams/dist/esm/ops/stream-reports.js', import.meta.url).href)) as {
  inspectStreams: (
    redis: Redis,
    streams: string[],
    group: undefined,
    now: number,
    skipMissing: boolean,
    entries: number,
  ) => Promise<unknown>;
};
const { DashboardData } = (await import(
  new URL('../../../libs/redis-streams/dist/esm/dashboard/dashboard-data.js', import.meta.url).href
)) as {
  DashboardData: new (
    redis: Redis,
    options: { match: string; minIdleMs: number; pageSize: number; history: { intervalMs: number; keepMs: number; streams: number } },
  ) => { close(): void; historyFootprint(): { streams: number; bytes: number } | null };
};
const { values: flags } = parseArgs({ options: { smoke: { type: 'boolean', default: false } } });
const STREAMS = flags.smoke ? 300 : 10_000;
const PEL = flags.smoke ? 5_000 : 1_000_000;
const ROUNDS = flags.smoke ? 1 : 5;
const redis = await startRedis();
const admin = new Redis(redis.url);
const log = (line: string) => process.stderr.write(`dashboard-cost: ${line}\n`);

async function preload(): Promise<void> {
  for (let i = 0; i < STREAMS; i += 1000) {
    const p = admin.pipeline();
    for (let j = i; j < Math.min(STREAMS, i + 1000); j++) {
      const key = `s:${String(j).padStart(6, '0')}`;
      p.xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
      p.xadd(key, '*', 'data', '{}');
    }
    await p.exec();
  }
  for (let i = 0; i < PEL; i += 10_000) {
    const p = admin.pipeline();
    if (i === 0) p.xgroup('CREATE', 'big', 'g', '$', 'MKSTREAM');
    for (let j = i; j < Math.min(PEL, i + 10_000); j++) p.xadd('big', '*', 'data', JSON.stringify({ j }));
    p.xreadgroup('GROUP', 'g', 'c1', 'COUNT', 10_000, 'STREAMS', 'big', '>');
    await p.exec();
  }
}

/** Redis' own CPU in ms and its commands so far. */
async function serverCounters(): Promise<{ cpuMs: number; commands: number }> {
  const cpu = await admin.info('cpu');
  const stats = await admin.info('stats');
  const n = (text: string, name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(text)![1]);
  return { cpuMs: (n(cpu, 'used_cpu_user') + n(cpu, 'used_cpu_sys')) * 1000, commands: n(stats, 'total_commands_processed') };
}

interface Cost {
  ms: number;
  cpuMs: number;
  commands: number;
}

async function measure(run: () => Promise<unknown>): Promise<Cost> {
  const before = await serverCounters();
  const t = performance.now();
  await run();
  const ms = performance.now() - t;
  const after = await serverCounters();
  // The two INFO calls of `after` are counted: take them off.
  return { ms, cpuMs: after.cpuMs - before.cpuMs, commands: after.commands - before.commands - 2 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const medianCost = (cs: Cost[]): Cost => ({
  ms: median(cs.map((c) => c.ms)),
  cpuMs: median(cs.map((c) => c.cpuMs)),
  commands: median(cs.map((c) => c.commands)),
});

log(`preloading ${STREAMS} streams and a PEL of ${PEL} entries`);
await preload();
// Without its history: the refreshes' own cost, as measured before it came (its sampler would read beside them).
const { server, url } = await serveDashboard(admin, { port: 0, match: '*', history: false });
const get = async (path: string) => {
  const res = await fetch(`${url}${path}`);
  if (res.status !== 200) throw new Error(`dashboard-cost: ${path} answered ${res.status}`);
  return res.json();
};
const page = 0;
const firstPage = Array.from({ length: Math.min(200, STREAMS) }, (_, i) => `s:${String(i).padStart(6, '0')}`);
const rows: [string, Cost, Cost | undefined][] = [];
const cold = await measure(() => get(`api/overview?page=${page}`));
const runs = {
  overview: [] as Cost[],
  inspect: [] as Cost[],
  stream: [] as Cost[],
  pending: [] as Cost[],
  inspectBig: [] as Cost[],
  entries: [] as Cost[],
  search: [] as Cost[],
};
for (let r = 0; r < ROUNDS; r++) {
  // Past the window in which refreshes share one read: each round reads Redis again.
  await new Promise((resolve) => setTimeout(resolve, 600));
  runs.overview.push(await measure(() => get(`api/overview?page=${page}`)));
  runs.inspect.push(await measure(() => inspectStreams(admin, firstPage, undefined, Date.now(), true, 1)));
  runs.stream.push(await measure(() => get('api/stream?key=big')));
  runs.pending.push(await measure(() => get('api/pending?key=big&group=g&count=50')));
  runs.inspectBig.push(await measure(() => inspectStreams(admin, ['big'], undefined, Date.now(), true, 10)));
  runs.entries.push(await measure(() => get('api/entries?key=big&count=20')));
  // A value no entry holds: the search reads its whole window (the most one request costs).
  runs.search.push(await measure(() => get('api/entries?key=big&count=20&field=data&value=nowhere')));
}
rows.push(['overview, first page (200 streams), keys not yet listed (SCAN of every key)', cold, undefined]);
rows.push(['overview, first page (200 streams)', medianCost(runs.overview), medianCost(runs.inspect)]);
rows.push([`stream page of the stream with a PEL of ${PEL.toLocaleString('en-US')}`, medianCost(runs.stream), medianCost(runs.inspectBig)]);
rows.push(['its PEL, one page of 50', medianCost(runs.pending), undefined]);
rows.push(['its entries, the newest 20', medianCost(runs.entries), undefined]);
rows.push(["its entries searched by a field's value, no match (reads its window of 1,000)", medianCost(runs.search), undefined]);
/**
 * One sampler round over the first `streams` streams, run by hand (its own timer stopped before it fires):
 * its Redis cost, and the rings it leaves (bytes by their size, and the heap's array buffers grown).
 */
async function samplerRound(streams: number): Promise<{ cost: Cost; bytes: number; buffers: number }> {
  const data = new DashboardData(admin, {
    match: 's:*',
    minIdleMs: 30_000,
    pageSize: 200,
    history: { intervalMs: 15_000, keepMs: 3_600_000, streams },
  });
  data.close();
  const internals = data as unknown as { closed: boolean; sampleRound(): Promise<void> };
  internals.closed = false;
  global.gc?.();
  const buffers = process.memoryUsage().arrayBuffers;
  const cost = await measure(() => internals.sampleRound());
  data.close();
  global.gc?.();
  return { cost, bytes: data.historyFootprint()!.bytes, buffers: process.memoryUsage().arrayBuffers - buffers };
}
const capped = await samplerRound(1_000);
const every = await samplerRound(STREAMS);
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
rows.push([`history: one sampler round, its default cap (1,000 streams; every 15 s); rings ${mb(capped.bytes)}`, capped.cost, undefined]);
rows.push([
  `history: one sampler round, every stream (${STREAMS.toLocaleString('en-US')}; \`history.streams\`); rings ${mb(every.bytes)} (heap's array buffers +${mb(every.buffers)})`,
  every.cost,
  undefined,
]);
const f = (c: Cost) => `${c.ms.toFixed(1)} | ${c.cpuMs.toFixed(1)} | ${c.commands}`;
process.stdout.write(
  [
    `Dashboard refresh cost: ${STREAMS.toLocaleString('en-US')} streams with a group each, one PEL of ${PEL.toLocaleString('en-US')} entries, medians of ${ROUNDS} rounds. Reference: \`redis-streams inspect\`'s reading of the same streams (inspectStreams), in the same run.${flags.smoke ? ' SMOKE sizes: no figure here is a measurement.' : ''}`,
    '',
    '| call | ms | Redis CPU ms | commands | × inspect (ms / Redis CPU) |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      ([name, c, ref]) =>
        `| ${name} | ${f(c)} | ${ref ? `${(c.ms / ref.ms).toFixed(2)}× / ${(c.cpuMs / Math.max(0.1, ref.cpuMs)).toFixed(2)}×` : '—'} |`,
    ),
  ].join('\n') + '\n',
);
server.close();
admin.disconnect();
await redis.stop();
