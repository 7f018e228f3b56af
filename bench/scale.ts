// The scale section of `npm run bench` (`--only scale` alone): costs that must not grow with the work,
// each against a reference measured in the same run on the same throwaway redis-server.
// 1. Reclaim never starves new work: a dead peer's PEL taken over while new entries arrive at 200/s;
//    their latency, and the takeover's rate against a fresh drain of as many entries.
// 2. N streams on one reader: latency of 200 entries/s on one of them, XAUTOCLAIMs sent per second,
//    Redis' µs per XREADGROUP and the start-up, against N = 1.
// 3. Self-drain as fast as a fresh drain: a restart's own PEL against a fresh backlog, per entry.
// Nothing here asserts a figure: it is a measurement; `problems` only lists runs that did not complete.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { waitFor } from '../test/support/wait-for.js';
import type { ScaleChildArgs, ScaleChildReport } from './scale-child.js';

const CHILD = fileURLToPath(new URL('./scale-child.js', import.meta.url));
const GROUP = 'bench';
const BATCH = 100;
const RATE = 200;

export const scaleSizes = (smoke: boolean) => ({
  reclaim: smoke ? 2_000 : 200_000,
  streams: smoke ? [1, 20] : [1, 100, 1000, 3000],
  trickleSeconds: smoke ? 1 : 5,
  drain: smoke ? 1_000 : 100_000,
  rounds: smoke ? 1 : 3,
});

export interface ScaleSection {
  smoke: boolean;
  sizes: ReturnType<typeof scaleSizes>;
  reclaim: { entries: number; msgsPerSec: number; freshDrainMsgsPerSec: number; fresh: Latency };
  streams: { n: number; startMs: number; fresh: Latency; autoClaimsPerSec: number; readUsPerCall: number }[];
  drain: { freshRuns: number[]; selfRuns: number[] };
  problems: string[];
}

export interface Latency {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

type Log = (line: string) => void;

export async function benchScale(o: { smoke: boolean; url: string; log: Log }): Promise<ScaleSection> {
  const sizes = scaleSizes(o.smoke);
  const admin = new Redis(o.url);
  const section: ScaleSection = {
    smoke: o.smoke,
    sizes,
    reclaim: undefined!,
    streams: [],
    drain: { freshRuns: [], selfRuns: [] },
    problems: [],
  };
  try {
    o.log(`scale 1/3: reclaim of a dead peer's ${sizes.reclaim} entries with ${RATE} new entries/s arriving`);
    section.reclaim = await reclaimRun(admin, o.url, sizes.reclaim);
    for (const n of sizes.streams) {
      o.log(`scale 2/3: one reader of ${n} streams, ${RATE} entries/s on one for ${sizes.trickleSeconds} s`);
      section.streams.push(await streamsRun(admin, o.url, n, sizes.trickleSeconds));
    }
    for (let round = 0; round < sizes.rounds; round++) {
      o.log(`scale 3/3: self-drain against fresh drain of ${sizes.drain} entries, round ${round + 1}/${sizes.rounds}`);
      // The order alternates: whichever runs second meets a warmer server.
      for (const kind of round % 2 === 0 ? (['fresh', 'self'] as const) : (['self', 'fresh'] as const)) {
        section.drain[kind === 'fresh' ? 'freshRuns' : 'selfRuns'].push(await drainRun(admin, o.url, sizes.drain, kind));
      }
    }
  } catch (err) {
    section.problems.push(String(err));
  } finally {
    admin.disconnect();
  }
  return section;
}

async function reclaimRun(admin: Redis, url: string, size: number): Promise<ScaleSection['reclaim']> {
  const reference = await drainRun(admin, url, size, 'fresh');
  const key = await backlog(admin, 'scale:reclaim', size);
  await readInto(admin, key, 'dead', size);
  const child = await startChild({
    url,
    streams: [key],
    group: GROUP,
    consumer: 'live',
    minIdleMs: 1000,
    blockMs: 1000,
    batchSize: BATCH,
    expect: -1,
  });
  // New entries on a schedule until the dead peer's PEL is empty; a few more after, then everything acked.
  const writer = trickle(admin, key);
  await waitFor(async () => (await consumerPending(admin, key, 'dead')) === 0, {
    message: 'the dead peer’s PEL taken over',
    timeoutMs: 600_000,
  });
  await writer.stop();
  await waitFor(async () => Number((await admin.xpending(key, GROUP))[0]) === 0, { message: 'everything acked', timeoutMs: 60_000 });
  const report = await child.report();
  await admin.del(key);
  const during = report.fresh.latencies.filter(
    (_, i) => report.fresh.at[i]! >= report.old.firstAt && report.fresh.at[i]! <= report.old.lastAt,
  );
  return { entries: size, msgsPerSec: rate(report), freshDrainMsgsPerSec: reference, fresh: latency(during) };
}

async function streamsRun(admin: Redis, url: string, n: number, seconds: number): Promise<ScaleSection['streams'][number]> {
  const streams = Array.from({ length: n }, (_, i) => `scale:n${n}:${i}`);
  const entries = RATE * seconds;
  const child = await startChild({
    url,
    streams,
    group: GROUP,
    consumer: 'c',
    minIdleMs: 30_000,
    blockMs: 1000,
    batchSize: BATCH,
    expect: entries,
  });
  // Measured from the first park (start-up has its own column): the self-drain and first sweep are behind it.
  await waitFor(async () => / flags=b .* cmd=xreadgroup/.test(String(await admin.client('LIST'))), {
    message: 'the reader parked',
    timeoutMs: 60_000,
  });
  await admin.config('RESETSTAT');
  const startedAt = performance.now();
  const writer = trickle(admin, streams[0]!, entries);
  await child.done;
  const elapsedS = (performance.now() - startedAt) / 1000;
  await writer.stop();
  const stats = await admin.call('INFO', 'commandstats');
  const report = await child.report();
  await admin.del(...streams);
  return {
    n,
    startMs: child.startMs,
    fresh: latency(report.fresh.latencies),
    autoClaimsPerSec: commandStat(String(stats), 'xautoclaim', 'calls') / elapsedS,
    readUsPerCall: commandStat(String(stats), 'xreadgroup', 'usec_per_call'),
  };
}

/** msgs/s of one drain: `fresh`, a backlog never read; `self`, the same backlog already pending under the consumer, which restarts. */
async function drainRun(admin: Redis, url: string, size: number, kind: 'fresh' | 'self'): Promise<number> {
  const key = await backlog(admin, `scale:drain:${kind}`, size);
  if (kind === 'self') await readInto(admin, key, 'c', size);
  const child = await startChild({
    url,
    streams: [key],
    group: GROUP,
    consumer: 'c',
    minIdleMs: 30_000,
    blockMs: 1000,
    batchSize: BATCH,
    expect: size,
  });
  await child.done;
  const report = await child.report();
  await admin.del(key);
  return rate(report);
}

/** A stream of `size` entries (`k old`) with the group created before them. */
async function backlog(admin: Redis, key: string, size: number): Promise<string> {
  await admin.del(key);
  await admin.xgroup('CREATE', key, GROUP, '0', 'MKSTREAM');
  for (let i = 0; i < size; i += 1000) {
    const p = admin.pipeline();
    for (let j = i; j < Math.min(size, i + 1000); j++) p.xadd(key, '*', 'k', 'old');
    await p.exec();
  }
  return key;
}

/** Delivers the whole backlog to `consumer` (its PEL), as if it had read it and died. */
async function readInto(admin: Redis, key: string, consumer: string, size: number): Promise<void> {
  for (let read = 0; read < size; read += 10_000) await admin.xreadgroup('GROUP', GROUP, consumer, 'COUNT', 10_000, 'STREAMS', key, '>');
}

async function consumerPending(admin: Redis, key: string, consumer: string): Promise<number> {
  const [, , , consumers] = (await admin.xpending(key, GROUP)) as [number, string, string, [string, string][] | null];
  return Number(consumers?.find(([name]) => name === consumer)?.[1] ?? 0);
}

/** RATE entries/s (`k new`, `t` the clock) on `key`, on a schedule, until stopped or `limit` are written. */
function trickle(admin: Redis, key: string, limit = Infinity): { stop: () => Promise<void> } {
  let on = true;
  const done = (async () => {
    const start = performance.now();
    for (let i = 0; on && i < limit; i++) {
      const dueAt = start + (i * 1000) / RATE;
      await waitFor(() => !on || performance.now() >= dueAt, { intervalMs: 1, message: 'the next write' });
      await admin.xadd(key, '*', 'k', 'new', 't', String(performance.timeOrigin + performance.now()));
    }
  })();
  return { stop: async () => ((on = false), await done) };
}

interface Child {
  startMs: number;
  done: Promise<void>;
  report(): Promise<ScaleChildReport>;
}

function startChild(args: ScaleChildArgs): Promise<Child> {
  const proc: ChildProcess = spawn(process.execPath, [CHILD, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout! });
  let onDone: () => void = () => undefined;
  let onReport: (r: ScaleChildReport) => void = () => undefined;
  const done = new Promise<void>((resolve) => (onDone = resolve));
  const reported = new Promise<ScaleChildReport>((resolve) => (onReport = resolve));
  return new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`scale child exited (${code}) before it was ready`)));
    lines.on('line', (line) => {
      const message = JSON.parse(line) as { ready?: boolean; startMs?: number; done?: boolean } & ScaleChildReport;
      if (message.ready) resolve({ startMs: message.startMs!, done, report: () => (proc.stdin!.write('report\n'), reported) });
      else if (message.done) onDone();
      else onReport(message);
    });
  });
}

function rate(report: ScaleChildReport): number {
  return (report.old.handled / Math.max(1, report.old.lastAt - report.old.firstAt)) * 1000;
}

export function latency(values: number[]): Latency {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

function commandStat(info: string, command: string, field: string): number {
  return Number(new RegExp(`cmdstat_${command}:.*?${field}=([\\d.]+)`).exec(info)?.[1] ?? 0);
}

export function scaleMarkdown(s: ScaleSection, smokeNote: string): string {
  const f = (v: number, d = 1) => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d }) : '—');
  const lat = (l: Latency) => `${f(l.p50)} / ${f(l.p99)} / ${f(l.max)}`;
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const base = s.streams[0];
  const lines = [
    `## Scale: costs that must not grow with the work${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `Reclaim: a dead peer's ${f(s.reclaim.entries)} pending entries taken over by one consumer (batch ${BATCH}, minIdleMs 1000, blockMs 1000) while ${RATE} new entries/s arrive on the same stream; reference: a fresh drain of as many entries by the same consumer, in this run.`,
    '',
    '| reclaim | msgs/s | × fresh drain | new entries during the takeover | append → handler p50 / p99 / max ms |',
    '| --- | ---: | ---: | ---: | ---: |',
    `| takeover | ${f(s.reclaim.msgsPerSec, 0)} | ${f(s.reclaim.msgsPerSec / s.reclaim.freshDrainMsgsPerSec, 2)}× | ${s.reclaim.fresh.count} | ${lat(s.reclaim.fresh)} |`,
    '',
    `N streams on one reader (one handler each, blockMs 1000): ${RATE} entries/s on one of them for ${s.sizes.trickleSeconds} s; the others idle. Reference: N = 1.`,
    '',
    '| streams | start-up ms (listen → ready) | append → handler p50 / p99 / max ms | p99 × N = 1 | XAUTOCLAIM calls/s | Redis µs per XREADGROUP |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    ...s.streams.map(
      (r) =>
        `| ${f(r.n)} | ${f(r.startMs, 0)} | ${lat(r.fresh)} | ${base ? f(r.fresh.p99 / base.fresh.p99, 2) : '—'}× | ${f(r.autoClaimsPerSec)} | ${f(r.readUsPerCall, 2)} |`,
    ),
    '',
    `Self-drain: ${f(s.sizes.drain)} entries already pending under the consumer, which restarts under its name, against a fresh backlog of as many (batch ${BATCH}); ${s.sizes.rounds} rounds, alternating which goes first, medians.`,
    '',
    '| drain | msgs/s (median) | × fresh | runs |',
    '| --- | ---: | ---: | --- |',
    `| fresh (XREADGROUP >) | ${f(median(s.drain.freshRuns), 0)} | 1.00× | ${s.drain.freshRuns.map((v) => f(v, 0)).join(', ')} |`,
    `| self-drain (XREADGROUP 0) | ${f(median(s.drain.selfRuns), 0)} | ${f(median(s.drain.selfRuns) / median(s.drain.freshRuns), 2)}× | ${s.drain.selfRuns.map((v) => f(v, 0)).join(', ')} |`,
  ];
  if (s.problems.length > 0) lines.push('', `Problems: ${s.problems.join('; ')}`);
  return lines.join('\n');
}
