// The reclaim-path section of `npm run bench` (`--only reclaim` alone): how one consumer takes a dead peer's
// entries, and what its idle beats cost Redis, at N streams, on three configurations side by side in one run:
// Redis 7.0 (`redis-server`: the XAUTOCLAIM sweep, the reference), Redis 8.6 (`redis8-server`) with
// `newerCommands: false` (the same sweep) and Redis 8.6 with the new path (the park's XREADGROUP … CLAIM claims,
// a sweep once per minIdleMs). Each configuration gets the same runs, taking turns at each N:
// 1. Redis CPU per beat: over a window with nothing to reclaim, INFO cpu (used_cpu_user + used_cpu_sys) and
//    commandstats deltas, divided by the consumer's parks (its XREADGROUP calls).
// 2. Reclaim latency: a dead consumer takes entries on random streams of the N (XADD and XREADGROUP in one
//    MULTI, so the measured consumer's parked read never gets them first), spread over the run; latency =
//    handler time − (delivery to the dead consumer + minIdleMs). Which path took each entry is read from the
//    replies on the consumer's own connections (the first reply that carried its id: a read or a sweep).
// The consumer is nestjs-redis-streams/core's StreamConsumer, in this process: what is measured is Redis'.
// Without `redis8-server` the 8.6 configurations are skipped and the report says so; nothing asserts a figure.
import { Redis, type Command } from 'ioredis';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { MissingBinaryError, parseInfo, startRedisServer, type RedisServerProcess } from '../scripts/lib/redis-server.mjs';
import { waitFor } from '../test/support/wait-for.js';
import { latency, type Latency } from './scale.js';

const GROUP = 'bench';
const BATCH = 100;
/** The reference server (whatever REDIS_SERVER_BIN says: this section compares Redis versions). */
const REFERENCE_BIN = 'redis-server';
/** Redis 8.4+ (XREADGROUP … CLAIM): CI installs Redis 8.6 under this name. */
const NEWER_BIN = 'redis8-server';
/**
 * How long a wait may take beyond its own time: Redis 8.6.3 can stall for tens of seconds under a blocked
 * XREADGROUP … CLAIM over thousands of streams (docs/benchmarks.md, "Reclaim path"), and the run must still end.
 */
const STALL_MS = 180_000;
/** The harness' one command in a CPU window (its edges), left out of the consumer's commands per beat. */
const HARNESS_COMMANDS = new Set(['info']);
/** The most streams a reader's park claims for (MAX_CLAIM_STREAMS in consumer/read/server-offer.ts): past it, the sweep. */
const CLAIM_STREAMS_BOUND = 32;

export const reclaimPathSizes = (smoke: boolean) => ({
  // 32: the transport's bound for the read's CLAIM (past it, the sweep).
  streams: smoke ? [1, 20] : [1, 32, 100, 3000],
  /** Entries the dead consumer takes per run (latency samples). */
  samples: smoke ? 5 : 40,
  /** Between two of its deliveries: uniform in [min, max] ms (never in step with the consumer's beat). */
  gapMs: smoke ? ([20, 60] as const) : ([100, 250] as const),
  blockMs: smoke ? 100 : 1000,
  /** Above blockMs, as the defaults are (30 s, 5 s): where the CLAIM path sweeps once per minIdleMs, not per beat. */
  minIdleMs: smoke ? 300 : 5000,
  /** The CPU window, nothing to reclaim: two of the CLAIM path's sweep intervals. */
  windowMs: smoke ? 400 : 10_000,
  /** An idle server's own CPU (its cron), measured once per server. */
  idleWindowMs: smoke ? 200 : 3000,
});

type ConfigName = 'redis7' | 'redis8-sweep' | 'redis8-claim';
interface Config {
  name: ConfigName;
  bin: string;
  newerCommands: boolean;
  /** How the consumer takes a dead peer's entries on it: the sweep alone, or mostly the park's read. */
  path: 'sweep' | 'read';
}
const CONFIGS: readonly Config[] = [
  { name: 'redis7', bin: REFERENCE_BIN, newerCommands: true, path: 'sweep' },
  { name: 'redis8-sweep', bin: NEWER_BIN, newerCommands: false, path: 'sweep' },
  { name: 'redis8-claim', bin: NEWER_BIN, newerCommands: true, path: 'read' },
];
const describePath = (c: Config) =>
  c.path === 'read'
    ? 'XREADGROUP … CLAIM (a sweep once per minIdleMs)'
    : `XAUTOCLAIM sweep${c.newerCommands ? '' : ', newerCommands: false'}`;

export interface ReclaimPathRun {
  config: ConfigName;
  n: number;
  /** What the consumer found on the server at start (health().server): `Redis 8.6.3: claim-on-read, …`. */
  found: string;
  window: {
    ms: number;
    /** The consumer's parks (its XREADGROUP calls) in the window. */
    beats: number;
    /** Redis' CPU (INFO cpu: user + sys) per beat, and per second of the window. */
    cpuUsPerBeat: number;
    cpuMsPerSec: number;
    /** Redis' time in the consumer's commands (commandstats usec, a script's inner calls included) per beat. */
    commandUsPerBeat: number;
    /** The consumer's commands per beat (commandstats calls, a script's inner calls included). */
    commandsPerBeat: number;
    xautoclaimPerBeat: number;
  };
  /** handler time − (delivery to the dead consumer + minIdleMs), ms. */
  latency: Latency;
  /** Of the samples handled: first seen in a reply of the park's read, or of a sweep (XAUTOCLAIM, its round script). */
  byRead: number;
  bySweep: number;
  /** XAUTOCLAIM calls from the first delivery to the last sample handled (a script's included), and that time. */
  sweepCalls: number;
  sweepSeconds: number;
}

export interface ReclaimPathSection {
  smoke: boolean;
  sizes: ReturnType<typeof reclaimPathSizes>;
  /** Each server binary: its version and an idle server's CPU, or why it did not run. */
  servers: { bin: string; version?: string; idleCpuMsPerSec?: number; skipped?: string }[];
  /** The configurations that ran, in table order. */
  ran: ConfigName[];
  runs: ReclaimPathRun[];
  problems: string[];
}

type Log = (line: string) => void;

export async function benchReclaimPath(o: { smoke: boolean; log: Log }): Promise<ReclaimPathSection> {
  const sizes = reclaimPathSizes(o.smoke);
  const section: ReclaimPathSection = { smoke: o.smoke, sizes, servers: [], ran: [], runs: [], problems: [] };
  const servers = new Map<string, RedisServerProcess>();
  // Every server of this section goes with the process, however it ends (a throw, process.exit, a signal).
  const killAll = () => servers.forEach((s) => s.proc.kill('SIGKILL'));
  const onSignal = (signal: NodeJS.Signals) => process.exit(signal === 'SIGINT' ? 130 : 143);
  process.on('exit', killAll);
  process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
  try {
    for (const bin of new Set(CONFIGS.map((c) => c.bin))) {
      try {
        const server = await startRedisServer({ bin });
        servers.set(bin, server);
        const admin = new Redis(server.url);
        try {
          section.servers.push({ bin, version: await serverVersion(admin), idleCpuMsPerSec: await idleCpu(admin, sizes.idleWindowMs) });
        } finally {
          admin.disconnect();
        }
      } catch (err) {
        if (!(err instanceof MissingBinaryError) || bin === REFERENCE_BIN) throw err;
        section.servers.push({ bin, skipped: `${bin} not found on PATH (Redis 8.4+ is needed for XREADGROUP … CLAIM)` });
      }
    }
    section.ran = CONFIGS.filter((c) => servers.has(c.bin)).map((c) => c.name);
    const skipped = CONFIGS.filter((c) => !servers.has(c.bin));
    o.log(
      `reclaim path: runs ${section.ran.join(', ')}${skipped.length > 0 ? `; SKIPS ${skipped.map((c) => c.name).join(', ')} (${NEWER_BIN} missing)` : ''}`,
    );
    for (const [i, n] of sizes.streams.entries()) {
      // A different configuration goes first at each N: none always meets the warmest (or coldest) machine.
      const turn = section.ran.map((_, k) => section.ran[(k + i) % section.ran.length]!);
      for (const name of turn) {
        const config = CONFIGS.find((c) => c.name === name)!;
        o.log(`reclaim path: ${name} (${describePath(config)}), ${n} stream${n === 1 ? '' : 's'}`);
        const run = await measure(servers.get(config.bin)!.url, config, n, sizes);
        section.runs.push(run);
        section.problems.push(...runProblems(config, run, sizes.samples));
        o.log(
          `  ${run.window.beats} beats: ${f(run.window.cpuUsPerBeat, 0)} µs Redis CPU / beat, ${f(run.window.commandsPerBeat)} commands / beat; ` +
            `latency p50 ${f(run.latency.p50, 0)} ms, max ${f(run.latency.max, 0)} ms; taken by read ${run.byRead}, by sweep ${run.bySweep}`,
        );
      }
    }
  } catch (err) {
    section.problems.push(String(err));
  } finally {
    // SIGKILL: throwaway servers, and one stalled in a CLAIM re-run loop would answer SIGTERM only after it.
    await Promise.all([...servers.values()].map((s) => s.stop('SIGKILL')));
    process.off('exit', killAll).off('SIGINT', onSignal).off('SIGTERM', onSignal);
  }
  return section;
}

/** One configuration at `n` streams: a consumer started afresh, its idle window, then the dead consumer's entries. */
async function measure(url: string, config: Config, n: number, sizes: ReturnType<typeof reclaimPathSizes>): Promise<ReclaimPathRun> {
  const streams = Array.from({ length: n }, (_, i) => `reclaim:${config.name}:${n}:${i}`);
  const admin = new Redis(url);
  const handled = new Map<string, number>();
  const consumer = new StreamConsumer({
    connection: url,
    group: GROUP,
    consumer: 'live',
    minIdleMs: sizes.minIdleMs,
    blockMs: sizes.blockMs,
    batchSize: BATCH,
    newerCommands: config.newerCommands,
    telemetry: false,
    logger: {
      log: () => undefined,
      warn: (m: string) => process.stderr.write(`reclaim path: ${m}\n`),
      error: (m: string) => process.stderr.write(`reclaim path: ${m}\n`),
    },
  });
  for (const stream of streams) consumer.handle(stream, (_data: unknown, ctx) => void handled.set(ctx.getId(), performance.now()));
  try {
    await consumer.start();
    // Start-up (groups, self-drain, the first sweep) behind it: two parks done.
    const parksAtStart = commandCalls(await stats(admin), 'xreadgroup');
    await waitFor(async () => commandCalls(await stats(admin), 'xreadgroup') >= parksAtStart + 2, {
      message: 'two parks of the consumer',
      timeoutMs: STALL_MS,
    });
    const window = await cpuWindow(admin, sizes.windowMs);

    const firstSeen = new Map<string, 'read' | 'sweep'>();
    for (const conn of consumer.unwrap<Redis[]>()) watchClaims(conn, firstSeen);
    const before = await stats(admin);
    const phaseStartedAt = performance.now();
    const deliveredAt = new Map<string, number>();
    // The dead consumer: XADD and its XREADGROUP in one MULTI (a parked read of the group is served after the EXEC,
    // and finds nothing new). Ids are `<ms>-<sample>`: unique across streams, so a reply's ids name the samples.
    for (let k = 1; k <= sizes.samples; k++) {
      const stream = streams[Math.floor(Math.random() * n)]!;
      const [, read] = (await admin
        .multi()
        .xadd(stream, `${Date.now()}-${k}`, 'k', String(k))
        .xreadgroup('GROUP', GROUP, 'dead', 'COUNT', 1, 'STREAMS', stream, '>')
        .exec())!;
      const id = (read![1] as [string, [string, string[]][]][])[0]![1][0]![0];
      deliveredAt.set(id, performance.now());
      const dueAt = performance.now() + sizes.gapMs[0] + Math.random() * (sizes.gapMs[1] - sizes.gapMs[0]);
      await waitFor(() => performance.now() >= dueAt, { intervalMs: 1, message: 'the next delivery' });
    }
    await waitFor(() => [...deliveredAt.keys()].every((id) => handled.has(id)), {
      message: `the ${sizes.samples} entries of the dead consumer handled`,
      timeoutMs: sizes.minIdleMs + 30 * sizes.blockMs + STALL_MS,
      intervalMs: 5,
    });
    const after = await stats(admin);
    const latencies = [...deliveredAt].map(([id, at]) => handled.get(id)! - (at + sizes.minIdleMs));
    const found = (await consumer.health({ stats: false })).server;
    return {
      config: config.name,
      n,
      found: found ? `${found.name}: ${found.features.join(', ') || 'none of the newer commands'}` : 'unknown',
      window,
      latency: latency(latencies),
      byRead: [...deliveredAt.keys()].filter((id) => firstSeen.get(id) === 'read').length,
      bySweep: [...deliveredAt.keys()].filter((id) => firstSeen.get(id) === 'sweep').length,
      sweepCalls: commandCalls(after, 'xautoclaim') - commandCalls(before, 'xautoclaim'),
      sweepSeconds: (performance.now() - phaseStartedAt) / 1000,
    };
  } finally {
    await consumer.close().catch(() => undefined);
    await admin.del(...streams).catch(() => undefined);
    admin.disconnect();
  }
}

/** Over `ms` with nothing to reclaim: Redis' CPU and the consumer's commands, per beat. */
async function cpuWindow(admin: Redis, ms: number): Promise<ReclaimPathRun['window']> {
  const before = await stats(admin);
  const startedAt = performance.now();
  await waitFor(() => performance.now() - startedAt >= ms, { intervalMs: 10, message: 'the end of the window' });
  const after = await stats(admin);
  const elapsedMs = performance.now() - startedAt;
  const beats = commandCalls(after, 'xreadgroup') - commandCalls(before, 'xreadgroup');
  const delta = (field: 'calls' | 'usec', command?: string) =>
    consumerCommands(after, field, command) - consumerCommands(before, field, command);
  const cpuUs = (cpuSeconds(after) - cpuSeconds(before)) * 1e6;
  return {
    ms: elapsedMs,
    beats,
    cpuUsPerBeat: cpuUs / beats,
    cpuMsPerSec: cpuUs / elapsedMs,
    commandUsPerBeat: delta('usec') / beats,
    commandsPerBeat: delta('calls') / beats,
    xautoclaimPerBeat: delta('calls', 'xautoclaim') / beats,
  };
}

/** An idle server's CPU per second (its own cron, nothing connected but this). */
async function idleCpu(admin: Redis, ms: number): Promise<number> {
  const before = cpuSeconds(await stats(admin));
  const startedAt = performance.now();
  await waitFor(() => performance.now() - startedAt >= ms, { intervalMs: 10, message: 'the end of the idle window' });
  return ((cpuSeconds(await stats(admin)) - before) * 1e6) / (performance.now() - startedAt);
}

type Stats = Record<string, string>;
const stats = async (admin: Redis): Promise<Stats> => parseInfo(String(await admin.call('INFO', 'cpu', 'commandstats')));
const cpuSeconds = (s: Stats) => Number(s['used_cpu_user']) + Number(s['used_cpu_sys']);
const commandField = (line: string | undefined, field: string) =>
  Number(new RegExp(`(?:^|,)${field}=([\\d.]+)`).exec(line ?? '')?.[1] ?? 0);
const commandCalls = (s: Stats, command: string) => commandField(s[`cmdstat_${command}`], 'calls');

/** Σ `field` of commandstats over the consumer's commands (one `command` only, when given). */
function consumerCommands(s: Stats, field: 'calls' | 'usec', command?: string): number {
  let sum = 0;
  for (const [key, line] of Object.entries(s)) {
    if (!key.startsWith('cmdstat_')) continue;
    const name = key.slice('cmdstat_'.length);
    if (command !== undefined ? name === command : !HARNESS_COMMANDS.has(name)) sum += commandField(line, field);
  }
  return sum;
}

async function serverVersion(admin: Redis): Promise<string> {
  const info = parseInfo(await admin.info('server'));
  return info['valkey_version'] ? `Valkey ${info['valkey_version']}` : `Redis ${info['redis_version']}`;
}

/**
 * Which path took each entry: the first reply on the consumer's connections that carried its id. A read's
 * (XREADGROUP: here only the dead consumer's entries, claimed, since the dead consumer takes every new one),
 * or a sweep's (XAUTOCLAIM alone, or the round script's XAUTOCLAIM replies). Reads ioredis' commands as they
 * go out (sendCommand, which pipelines go through too): nothing of the consumer is changed.
 */
function watchClaims(conn: Redis, firstSeen: Map<string, 'read' | 'sweep'>): void {
  const send = conn.sendCommand.bind(conn);
  conn.sendCommand = ((command: Command, ...rest: unknown[]) => {
    const name = command.name.toLowerCase();
    const path = name === 'xreadgroup' ? 'read' : ['xautoclaim', 'evalsha', 'eval'].includes(name) ? 'sweep' : undefined;
    if (path)
      command.promise.then(
        (reply) => claimedIds(name, reply).forEach((id) => firstSeen.has(id) || firstSeen.set(id, path)),
        () => undefined,
      );
    return (send as (...args: unknown[]) => unknown)(command, ...rest);
  }) as Redis['sendCommand'];
}

/**
 * The entry ids of a reply: XREADGROUP `[[stream, [[id, fields…]…]]…]` (with CLAIM, Redis 8.6 flattens it:
 * `[stream, entries, stream, entries…]`), XAUTOCLAIM `[cursor, entries, deleted]`, the round script
 * `[visited, (index, XAUTOCLAIM reply)…]`.
 */
function claimedIds(name: string, reply: unknown): string[] {
  const entries = (list: unknown) =>
    Array.isArray(list) ? list.flatMap((e) => (Array.isArray(e) && Array.isArray(e[1]) ? [String(e[0])] : [])) : [];
  if (!Array.isArray(reply)) return [];
  if (name === 'xreadgroup')
    return typeof reply[0] === 'string'
      ? reply.flatMap((r, i) => (i % 2 === 1 ? entries(r) : []))
      : reply.flatMap((s) => (Array.isArray(s) ? entries(s[1]) : []));
  if (name === 'xautoclaim') return entries(reply[1]);
  // Another script's reply (a retry adoption's waits, a lease's ids) has no XAUTOCLAIM reply after an index.
  if (typeof reply[0] !== 'number') return [];
  return reply.flatMap((r, i) => (i > 0 && i % 2 === 0 && Array.isArray(r) ? entries(r[1]) : []));
}

/** A run that did not take its samples, or not by the path its configuration names. */
function runProblems(config: Config, run: ReclaimPathRun, samples: number): string[] {
  const at = `${config.name} at ${run.n} streams`;
  const problems: string[] = [];
  if (run.latency.count !== samples) problems.push(`${at}: ${run.latency.count} of ${samples} samples`);
  if (!(run.window.beats > 0)) problems.push(`${at}: no park in the CPU window`);
  const claimsOnRead = run.found.includes('claim-on-read');
  if (claimsOnRead !== (config.path === 'read')) problems.push(`${at}: the consumer found "${run.found}"`);
  const readClaims = config.path === 'read' && run.n <= CLAIM_STREAMS_BOUND;
  if (!readClaims && run.byRead > 0) problems.push(`${at}: ${run.byRead} entries taken by a read on the sweep path`);
  // Redis wakes a blocked CLAIM read when an entry turns claimable: a sweep, once per minIdleMs, takes one now and then.
  if (readClaims && run.byRead === 0) problems.push(`${at}: no entry taken by the park's read`);
  return problems;
}

const f = (v: number, d = 1) => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d }) : '—');

export function reclaimPathMarkdown(s: ReclaimPathSection, smokeNote: string): string {
  const { sizes } = s;
  const version = (c: Config) => s.servers.find((x) => x.bin === c.bin)?.version ?? c.bin;
  const label = (name: ConfigName) => {
    const c = CONFIGS.find((x) => x.name === name)!;
    return `${version(c)}, ${describePath(c)}`;
  };
  const ref = (n: number) => s.runs.find((r) => r.config === 'redis7' && r.n === n);
  const x = (v: number, r: number | undefined) => (r === undefined || !Number.isFinite(v / r) ? '—' : `${(v / r).toFixed(2)}×`);
  const rows = sizes.streams.flatMap((n) =>
    s.ran.map((name) => s.runs.find((r) => r.config === name && r.n === n)).filter((r) => r !== undefined),
  );
  const lines = [
    `## Reclaim path: XAUTOCLAIM sweep against XREADGROUP … CLAIM${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `One consumer (nestjs-redis-streams/core StreamConsumer, batch ${BATCH}, blockMs ${f(sizes.blockMs)}, minIdleMs ${f(sizes.minIdleMs)}) reads N streams, one server per binary, the configurations taking turns at each N (a different one first). ` +
      `CPU: a ${f(sizes.windowMs / 1000)} s window with nothing to reclaim; a beat is one park (the consumer's XREADGROUP calls); Redis CPU is INFO cpu user + sys, its time in commands and the commands are commandstats (a script's inner calls counted too). ` +
      `Latency: a dead consumer takes ${sizes.samples} entries on random streams of the N, ${sizes.gapMs[0]}–${sizes.gapMs[1]} ms apart; latency = handler − (delivery to it + minIdleMs). "Taken by": the first reply on the consumer's connections that carried the entry. Ratios: × the Redis 7.0 run at the same N, in this run.`,
    '',
    `Configurations run: ${s.ran.map(label).join('; ')}.${s.servers
      .filter((x) => x.skipped)
      .map((x) => ` Skipped: every ${x.bin} configuration (${x.skipped}).`)
      .join('')} Idle server CPU (its cron, nothing connected): ${s.servers
      .filter((x) => x.idleCpuMsPerSec !== undefined)
      .map((x) => `${x.version} ${f(x.idleCpuMsPerSec!, 2)} ms/s`)
      .join(', ')}.`,
    '',
    '| streams | configuration | beats/s | Redis CPU ms/s (× 7.0) | Redis CPU µs / beat (× 7.0) | µs in commands / beat (× 7.0) | commands / beat | XAUTOCLAIM / beat | latency p50 / p99 / max ms (p50 × 7.0) | taken by read / sweep | XAUTOCLAIM calls/s while taking |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) => {
      const w = r.window;
      const base = ref(r.n);
      return `| ${f(r.n)} | ${label(r.config)} | ${f((w.beats * 1000) / w.ms)} | ${f(w.cpuMsPerSec, 2)} (${x(w.cpuMsPerSec, base?.window.cpuMsPerSec)}) | ${f(w.cpuUsPerBeat, 0)} (${x(w.cpuUsPerBeat, base?.window.cpuUsPerBeat)}) | ${f(w.commandUsPerBeat, 0)} (${x(w.commandUsPerBeat, base?.window.commandUsPerBeat)}) | ${f(w.commandsPerBeat)} | ${f(w.xautoclaimPerBeat)} | ${f(r.latency.p50, 0)} / ${f(r.latency.p99, 0)} / ${f(r.latency.max, 0)} (${x(r.latency.p50, base?.latency.p50)}) | ${r.byRead} / ${r.bySweep} | ${f(r.sweepCalls / r.sweepSeconds)} |`;
    }),
  ];
  if (s.problems.length > 0) lines.push('', `Problems: ${s.problems.join('; ')}`);
  return lines.join('\n');
}
