// The ordered section of `npm run bench` (`--only ordered` alone): what `ordered: true` costs the drain.
// One logical stream `orders` of PARTITIONS partitions, a backlog of entries whose `partitionKey` is one of
// K keys (1, 16, 1,000, 100,000), drained by 1 or 4 workers (processes of their own, bench/ordered-child.ts,
// each a StreamConsumer of nestjs-redis-streams/core) with a no-op handler or one that awaits a 1 ms timer,
// once with `handle('orders', h, { partitions, ordered: true })` and once without `ordered`: the same entries,
// partitions, concurrency, batch and handler. The two take turns (the order alternates) and the ratio
// ordered / unordered of their medians is the figure; nothing asserts a time.
// Two ways to start a run:
// - warm (the table): the workers are up first, and with `ordered` the partitions' ownership is settled
//   (each worker owns its share, as health() reports); then the whole backlog appears at once (its XADDs
//   in one MULTI … EXEC), and the drain is timed from the first entry handled to the last one acked;
// - cold (a few rows): the backlog is written first, then the workers' consumers start on it; the same
//   timing, so the ownership share-out (the first worker owns every partition until the others join and
//   it hands theirs over) is inside it.
// `problems` lists runs that did not complete, and an ordered run that handled a key out of order.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { partitionKey, partitionOf } from 'nestjs-redis-streams';
import { priorityStreamOf } from '../libs/redis-streams/src/key-names.js';
import { waitFor } from '../test/support/wait-for.js';
import type { OrderedChildArgs, OrderedChildReport, OrderedRun } from './ordered-child.js';

const CHILD = fileURLToPath(new URL('./ordered-child.js', import.meta.url));
const PATTERN = 'orders';
const GROUP = 'bench';
const PARTITIONS = 4;
const CONCURRENCY = 16;
const BATCH = 100;
const BLOCK_MS = 1000;
/**
 * The ownership's ttl (minIdleMs) and beat (leaseRenewMs): a share-out settles in about two beats, so the beat is
 * shorter than the default (minIdleMs / 3). Not much shorter: it is also how often every entry in hand has its idle
 * time reset (one XPENDING per entry and an XCLAIM, in a script), and ordered readers hold more entries than one
 * unordered reader (up to 2 × batchSize per partition, besides the read ahead): at 100 ms those renewals were most of
 * the consumers' Redis calls in both variants (0.5–0.9 XPENDING per entry handled, against 0.01 XACK).
 */
const MIN_IDLE_MS = 10_000;
const LEASE_RENEW_MS = 1_000;
/** Commands of the harness (the backlog's write, its polls, the cleanup; `xinfo|groups` counts as `xinfo`), left out of the consumers' Redis figures. */
const HARNESS_COMMANDS = new Set(['xadd', 'multi', 'exec', 'xinfo', 'info', 'config', 'xgroup', 'scan', 'del', 'ping']);

export const orderedSizes = (smoke: boolean) => ({
  /** Entries per run; with one key (one lane, strictly one at a time) a tenth of it. */
  entries: smoke ? 300 : 20_000,
  entriesOneKey: smoke ? 100 : 2_000,
  keys: [1, 16, 1_000, 100_000],
  workers: [1, 4],
  handlerMs: [0, 1],
  /** Each variant of each case runs this many times, the variants taking turns; medians. */
  rounds: smoke ? 1 : 2,
  /** Cold-start rows (the backlog written before the workers start): these keys, 4 workers, the 1 ms handler. */
  coldKeys: smoke ? [1_000] : [1_000, 100_000],
  /** Before the measured runs, one drain of this many entries per variant (not recorded): the workers' JIT warms up. */
  warmUp: smoke ? 0 : 5_000,
});

/** `ordered-c4`: ordered at concurrency 4, so that one worker owning the 4 partitions runs 16 handlers at most, as unordered's 16. */
export type OrderedVariant = 'unordered' | 'ordered' | 'ordered-c4';

export interface OrderedMeasurement {
  msgsPerSec: number;
  ms: number;
  handled: number;
  /** The workers' CPU (user + system) per entry, summed over the workers. */
  cpuUsPerEntry: number;
  /** Redis: the consumers' commands per entry (INFO commandstats calls, a script's inner calls included) and their µs per entry. */
  redisCallsPerEntry: number;
  redisUsPerEntry: number;
  /** The three commands with the most calls: `name calls/entry`. */
  topCommands: string;
  outOfOrder: number;
  overlaps: number;
  /** The share of the entries the busiest worker handled (1 with one worker). */
  busiestShare: number;
}

export interface OrderedCase {
  keys: number;
  workers: number;
  handlerMs: number;
  start: 'warm' | 'cold';
  entries: number;
  runs: Partial<Record<OrderedVariant, OrderedMeasurement[]>>;
}

export interface OrderedSection {
  smoke: boolean;
  sizes: ReturnType<typeof orderedSizes>;
  settings: { partitions: number; concurrency: number; batchSize: number; blockMs: number; minIdleMs: number; leaseRenewMs: number };
  /** How many of the 16 keys' entries land on each partition (partitionOf is a hash: not even). */
  sixteenKeysPerPartition: number[];
  /** Cores, and the machine's 1-minute load average when the section started and ended (other work on it shows there). */
  machine: { cores: number; loadAtStart: number; loadAtEnd: number };
  cases: OrderedCase[];
  problems: string[];
}

type Log = (line: string) => void;

export async function benchOrdered(o: { smoke: boolean; url: string; log: Log }): Promise<OrderedSection> {
  const sizes = orderedSizes(o.smoke);
  const section: OrderedSection = {
    smoke: o.smoke,
    sizes,
    settings: {
      partitions: PARTITIONS,
      concurrency: CONCURRENCY,
      batchSize: BATCH,
      blockMs: BLOCK_MS,
      minIdleMs: MIN_IDLE_MS,
      leaseRenewMs: LEASE_RENEW_MS,
    },
    sixteenKeysPerPartition: perPartition(16),
    machine: { cores: cpus().length, loadAtStart: loadavg()[0]!, loadAtEnd: NaN },
    cases: [],
    problems: [],
  };
  const admin = new Redis(o.url);
  const workers: Worker[] = [];
  // The workers go with this process, however it ends.
  const killAll = () => workers.forEach((w) => w.proc.kill('SIGKILL'));
  process.on('exit', killAll);
  try {
    const most = Math.max(...sizes.workers);
    workers.push(...(await Promise.all(Array.from({ length: most }, (_, i) => Worker.spawn({ url: o.url, consumer: `w${i}` })))));
    const cases: OrderedCase[] = [];
    for (const handlerMs of sizes.handlerMs)
      for (const keys of sizes.keys)
        for (const n of sizes.workers)
          cases.push({ keys, workers: n, handlerMs, start: 'warm', entries: entriesFor(sizes, keys), runs: {} });
    for (const keys of sizes.coldKeys)
      cases.push({ keys, workers: most, handlerMs: 1, start: 'cold', entries: entriesFor(sizes, keys), runs: {} });
    if (sizes.warmUp > 0) {
      o.log(`ordered: warm-up (${fmt(sizes.warmUp)} entries, 1,000 keys, ${most} workers, each variant once; not recorded)`);
      const warmUp: OrderedCase = { keys: 1_000, workers: most, handlerMs: 1, start: 'warm', entries: sizes.warmUp, runs: {} };
      for (const variant of ['unordered', 'ordered'] as const) await measure(admin, workers, warmUp, variant);
    }
    let turn = 0;
    for (const c of cases) {
      section.cases.push(c);
      // Equal handler slots (one worker): with the 1 ms handler, where the slots bound the drain.
      const variants: OrderedVariant[] =
        c.workers === 1 && c.start === 'warm' && c.handlerMs > 0 ? ['unordered', 'ordered', 'ordered-c4'] : ['unordered', 'ordered'];
      for (let round = 0; round < sizes.rounds; round++) {
        // A different variant goes first each time: none always meets the warmer (or colder) machine.
        const order = variants.map((_, i) => variants[(i + turn) % variants.length]!);
        turn++;
        for (const variant of order) {
          const m = await measure(admin, workers.slice(0, c.workers), c, variant);
          (c.runs[variant] ??= []).push(m);
          o.log(
            `ordered: ${c.start} ${fmt(c.keys)} key(s), ${c.workers} worker(s), ${c.handlerMs ? `${c.handlerMs} ms` : 'no-op'} handler, ${variant}: ${Math.round(m.msgsPerSec)} msgs/s, ${m.cpuUsPerEntry.toFixed(1)} µs worker CPU/entry, ${m.redisCallsPerEntry.toFixed(2)} Redis calls/entry (${m.topCommands})`,
          );
          if (m.handled < c.entries) section.problems.push(`${describe(c)} ${variant}: handled ${m.handled} of ${c.entries}`);
          if (variant !== 'unordered' && m.outOfOrder + m.overlaps > 0)
            section.problems.push(
              `${describe(c)} ${variant}: ${m.outOfOrder} out-of-order start(s), ${m.overlaps} overlapping run(s) of one key`,
            );
        }
      }
    }
  } catch (err) {
    section.problems.push(String(err));
  } finally {
    section.machine.loadAtEnd = loadavg()[0]!;
    await Promise.all(workers.map((w) => w.exit()));
    process.off('exit', killAll);
    admin.disconnect();
  }
  return section;
}

const entriesFor = (sizes: ReturnType<typeof orderedSizes>, keys: number) => (keys === 1 ? sizes.entriesOneKey : sizes.entries);
const fmt = (v: number) => v.toLocaleString('en-US');
const describe = (c: OrderedCase) =>
  `${c.start} ${fmt(c.keys)} key(s), ${c.workers} worker(s), ${c.handlerMs ? `${c.handlerMs} ms` : 'no-op'} handler`;

function perPartition(keys: number): number[] {
  const counts = new Array<number>(PARTITIONS).fill(0);
  for (let k = 0; k < keys; k++) counts[partitionOf(`k${k}`, PARTITIONS)]!++;
  return counts;
}

let uniq = 0;

/**
 * One drain of `c.entries` entries by `workers`, as `variant`; the Redis keys of the run are deleted after. `extra`: more
 * of the run's settings (the durability section's durableAcks).
 */
export async function measure(
  admin: Redis,
  workers: Worker[],
  c: OrderedCase,
  variant: OrderedVariant,
  extra: Partial<OrderedRun> = {},
): Promise<OrderedMeasurement> {
  const keyPrefix = `ordered${++uniq}:`;
  const bases = Array.from({ length: PARTITIONS }, (_, i) => partitionKey(keyPrefix, PATTERN, i));
  // With priorities (the fair section's rows), each partition's levels, level 0 the partition itself.
  const levels = extra.priorityLevels ?? 1;
  const streams = bases.flatMap((base) => Array.from({ length: levels }, (_, level) => priorityStreamOf(base, level, false)));
  for (const stream of streams) await admin.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
  const run: OrderedRun = {
    keyPrefix,
    pattern: PATTERN,
    group: GROUP,
    ordered: variant !== 'unordered',
    partitions: PARTITIONS,
    concurrency: variant === 'ordered-c4' ? CONCURRENCY / PARTITIONS : CONCURRENCY,
    batchSize: BATCH,
    blockMs: BLOCK_MS,
    minIdleMs: MIN_IDLE_MS,
    leaseRenewMs: LEASE_RENEW_MS,
    handlerMs: c.handlerMs,
    ...extra,
  };
  // Entry j: key k(j mod K), its s-th of that key; on the partition the producer would pick for the key.
  const expected = new Array<number>(streams.length).fill(0);
  const backlog = admin.multi();
  for (let j = 0; j < c.entries; j++) {
    const key = `k${j % c.keys}`;
    const at = partitionOf(key, PARTITIONS) * levels + (extra.spreadLevels ? j % levels : 0);
    expected[at]!++;
    backlog.xadd(streams[at]!, '*', 'data', JSON.stringify({ s: Math.floor(j / c.keys) }), 'partitionKey', key);
  }
  const startAll = () => Promise.all(workers.map((w) => w.call({ cmd: 'start', ...run })));
  const markAll = async () => {
    await Promise.all(workers.map((w) => w.call({ cmd: 'mark' })));
    await admin.config('RESETSTAT');
  };
  if (c.start === 'warm') {
    await startAll();
    if (run.ordered) await settled(workers);
    await markAll();
    // MULTI … EXEC: the backlog is whole before any parked read sees its first entry.
    await backlog.exec();
  } else {
    await backlog.exec();
    await markAll();
    await startAll();
  }
  let acked = 0;
  await waitFor(
    async () => {
      const replies = (await admin.pipeline(streams.map((s) => ['xinfo', 'GROUPS', s])).exec())!.map(([err, groups]) => {
        if (err) throw err;
        const group = (groups as unknown[][])[0]!;
        const field = (name: string) => Number(group[group.indexOf(name) + 1]);
        return { read: field('entries-read'), pending: field('pending') };
      });
      acked = replies.reduce((sum, r) => sum + r.read - r.pending, 0);
      return replies.every((r, i) => r.pending === 0 && r.read === expected[i]);
    },
    { intervalMs: 5, timeoutMs: 60_000, progress: () => acked, message: `${describe(c)} ${variant}: every entry acked` },
  );
  const doneAt = performance.timeOrigin + performance.now();
  const stats = String(await admin.call('INFO', 'commandstats'));
  const reports = (await Promise.all(workers.map((w) => w.call({ cmd: 'stop' })))).map((r) => r.report as OrderedChildReport);
  await clean(admin, keyPrefix);
  const firstAt = Math.min(...reports.filter((r) => r.handled > 0).map((r) => r.firstAt));
  const commands = [...stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)]
    .map(([, name, calls, usec]) => ({ name: name!, calls: Number(calls), usec: Number(usec) }))
    .filter((s) => !HARNESS_COMMANDS.has(s.name.split('|')[0]!));
  const n = c.entries;
  return {
    msgsPerSec: (n / (doneAt - firstAt)) * 1000,
    ms: doneAt - firstAt,
    handled: reports.reduce((sum, r) => sum + r.handled, 0),
    cpuUsPerEntry: reports.reduce((sum, r) => sum + r.cpuUs, 0) / n,
    redisCallsPerEntry: commands.reduce((sum, s) => sum + s.calls, 0) / n,
    redisUsPerEntry: commands.reduce((sum, s) => sum + s.usec, 0) / n,
    topCommands: commands
      .sort((a, b) => b.calls - a.calls)
      .slice(0, 3)
      .map((s) => `${s.name} ${(s.calls / n).toFixed(2)}`)
      .join(', '),
    outOfOrder: reports.reduce((sum, r) => sum + r.outOfOrder, 0),
    overlaps: reports.reduce((sum, r) => sum + r.overlaps, 0),
    busiestShare:
      Math.max(...reports.map((r) => r.handled)) /
      Math.max(
        1,
        reports.reduce((sum, r) => sum + r.handled, 0),
      ),
  };
}

/** Every partition owned, each worker owning its share, and every worker seeing all of them as members. */
async function settled(workers: Worker[]): Promise<void> {
  const share = PARTITIONS / workers.length;
  await waitFor(
    async () => {
      const statuses = (await Promise.all(workers.map((w) => w.call({ cmd: 'status' })))) as { owned: number; members: number[] }[];
      return statuses.every((s) => Math.abs(s.owned - share) < 1 && s.members.every((m) => m === workers.length));
    },
    { intervalMs: 10, timeoutMs: 30_000, message: `the ownership of ${PARTITIONS} partitions shared by ${workers.length} worker(s)` },
  );
}

async function clean(admin: Redis, keyPrefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await admin.del(...keys);
  } while (cursor !== '0');
}

/** A worker process: commands go one at a time in order, each answered by one line. */
export class Worker {
  private readonly answers: { resolve: (value: any) => void; reject: (err: Error) => void }[] = [];

  private constructor(readonly proc: ChildProcess) {
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      const message = JSON.parse(line) as { error?: string };
      const waiting = this.answers.shift();
      if (message.error !== undefined) waiting?.reject(new Error(`ordered worker: ${message.error}`));
      else waiting?.resolve(message);
    });
    proc.once('exit', (code, signal) => {
      for (const waiting of this.answers.splice(0)) waiting.reject(new Error(`ordered worker exited (${code ?? signal})`));
    });
  }

  static async spawn(args: OrderedChildArgs): Promise<Worker> {
    const proc = spawn(process.execPath, [CHILD, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const worker = new Worker(proc);
    // Its first line: ready.
    await new Promise((resolve, reject) => worker.answers.push({ resolve, reject }));
    return worker;
  }

  call(command: { cmd: string } & Partial<OrderedRun>): Promise<any> {
    return new Promise((resolve, reject) => {
      this.answers.push({ resolve, reject });
      this.proc.stdin!.write(JSON.stringify(command) + '\n');
    });
  }

  async exit(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdin!.write('{"cmd":"exit"}\n');
    await exited;
  }
}

export function orderedMarkdown(s: OrderedSection, smokeNote: string): string {
  const f = (v: number, d = 0) =>
    Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '—';
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const of = (c: OrderedCase, v: OrderedVariant, pick: (m: OrderedMeasurement) => number) => median((c.runs[v] ?? []).map(pick));
  const rate = (c: OrderedCase, v: OrderedVariant) => of(c, v, (m) => m.msgsPerSec);
  const ratio = (c: OrderedCase, v: OrderedVariant) => rate(c, v) / rate(c, 'unordered');
  const handler = (c: OrderedCase) => (c.handlerMs ? `${c.handlerMs} ms` : 'no-op');
  const runs = (c: OrderedCase, v: OrderedVariant) => (c.runs[v] ?? []).map((m) => f(m.msgsPerSec)).join(', ') || '—';
  const pair = (c: OrderedCase, pick: (m: OrderedMeasurement) => number, d: number) =>
    `${f(of(c, 'unordered', pick), d)} / ${f(of(c, 'ordered', pick), d)}`;
  const { settings: t } = s;
  const row = (c: OrderedCase) =>
    `| ${f(c.keys)} | ${c.workers} | ${handler(c)} | ${f(c.entries)} | ${f(rate(c, 'unordered'))} | ${f(rate(c, 'ordered'))} | **${f(ratio(c, 'ordered'), 2)}×** | ${c.runs['ordered-c4'] ? `${f(ratio(c, 'ordered-c4'), 2)}×` : '—'} | ${pair(c, (m) => m.cpuUsPerEntry, 1)} | ${pair(c, (m) => m.redisCallsPerEntry, 2)} | ${pair(c, (m) => m.redisUsPerEntry, 1)} | ${c.workers > 1 ? pair(c, (m) => m.busiestShare * 100, 0) : '—'} | ${runs(c, 'unordered')}; ${runs(c, 'ordered')} |`;
  const header = [
    '| keys | workers | handler | entries | unordered msgs/s | ordered msgs/s | ordered / unordered | ordered at concurrency 4 / unordered | worker CPU µs / entry (u / o) | Redis calls / entry (u / o) | Redis µs / entry (u / o) | % handled by the busiest worker (u / o) | runs msgs/s (u; o) |',
    '| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  const warm = s.cases.filter((c) => c.start === 'warm');
  const cold = s.cases.filter((c) => c.start === 'cold');
  const aimed = warm.filter((c) => c.keys >= 1000 && c.handlerMs === 1);
  const aim = s.smoke
    ? 'Aim (ordered ≥ 0.8× unordered at ≥ 1,000 keys with the 1 ms handler): not evaluated (smoke run: ratios at these sizes are not measurements).'
    : `Aim (ordered ≥ 0.8× unordered at ≥ 1,000 keys with the 1 ms handler): ${aimed
        .map(
          (c) =>
            `${f(c.keys)} keys, ${c.workers} worker(s): ${f(ratio(c, 'ordered'), 2)}× (${ratio(c, 'ordered') >= 0.8 ? 'held' : 'MISSED'}${c.runs['ordered-c4'] ? `; at equal handler slots, concurrency ${t.concurrency / t.partitions}: ${f(ratio(c, 'ordered-c4'), 2)}×` : ''})`,
        )
        .join('; ')}.`;
  const lines = [
    `## Ordered patterns: drain, ordered against unordered${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `One logical stream of ${t.partitions} partitions; a backlog of entries each carrying a \`partitionKey\` (one of K keys, entry j has key j mod K, on the partition \`partitionOf(key, ${t.partitions})\` picks), drained by 1 or 4 worker processes, each a \`StreamConsumer\` (concurrency ${t.concurrency}, batch ${t.batchSize}, blockMs ${t.blockMs}, minIdleMs ${f(t.minIdleMs)}, leaseRenewMs ${t.leaseRenewMs}) registering \`handle('orders', h, { partitions: ${t.partitions}, ordered: true })\` or the same without \`ordered\`: the same entries, handler and options. Handler: no-op, or \`await\` a 1 ms timer. Machine: ${s.machine.cores} cores (1-minute load average ${f(s.machine.loadAtStart, 1)} at the start, ${f(s.machine.loadAtEnd, 1)} at the end), the workers, Redis and this harness on it. Timed from the first entry handled to the last acked (XINFO GROUPS: pending 0, every entry read); the variants take turns ${s.sizes.rounds} time(s) per case (the order alternates), medians. ${f(s.sizes.entries)} entries a run, ${f(s.sizes.entriesOneKey)} with 1 key (one lane: one entry at a time). With 100,000 keys every entry has a key of its own (the backlog is smaller than the key space). The 16 keys fall ${s.sixteenKeysPerPartition.join(' / ')} on the ${t.partitions} partitions.`,
    '',
    `\`concurrency\` is per reader: unordered, one reader takes all ${t.partitions} partitions of a worker (${t.concurrency} handlers at most per worker); ordered, each owned partition has a reader of its own (${t.concurrency} per owned partition: one worker owning all ${t.partitions} runs up to ${t.partitions * t.concurrency}; four workers own one each, ${t.concurrency} each, as unordered). The "ordered at concurrency 4" column (1 worker, 1 ms handler) runs ordered at ${t.concurrency / t.partitions} per partition: ${t.concurrency} handlers at most, as unordered's.`,
    '',
    'Warm: the workers are up and (ordered) the partitions shared out before the backlog appears, whole, in one MULTI … EXEC.',
    '',
    ...header,
    ...warm.map(row),
    '',
    aim,
    ...(cold.length > 0
      ? [
          '',
          'Cold: the backlog is written first, then the workers start their consumers on it (the timing is the same: the first worker to start owns every partition until the others join and it hands theirs over, inside the window).',
          '',
          ...header,
          ...cold.map(row),
        ]
      : []),
  ];
  if (s.problems.length > 0) lines.push('', `Problems: ${s.problems.join('; ')}`);
  return lines.join('\n');
}
