// The durability section of `npm run bench` (`--only durability` alone): what a user pays for each durable setting
// (issue 48), as ratios to the default measured in the same run. A master and a replica of its own (loopback, AOF on
// both with appendfsync everysec, so that WAITAOF has something to wait for), on `redis8-server` where it is installed
// (WAITAOF needs 7.2+; Redis 7.0 has none and its fsync rows are left out), else `redis-server`.
// - Produce: N emits of one client, one at a time (each waits for its own answer: the latency a caller sees) and 100
//   in flight (emits begun together share one wait per slot), with `durability` none, { replicas: 1 },
//   { replicas: 1, fsync: true }; the variants take turns, medians.
// - Ordered drain: a backlog over 1,000 keys, 4 partitions, drained by one worker process (bench/ordered-child.ts),
//   without durable acks, with { replicas: 1 }, and with fsync; the 1 ms handler and the no-op; medians.
// Nothing asserts a time: `problems` lists runs that did not complete, or an order violation.
import { cpus, loadavg } from 'node:os';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { RedisStreamsClient, RedisStreamsRecord, type Durability, type DurableAcks } from 'nestjs-redis-streams';
import { startRedisServer, type RedisServerProcess } from '../scripts/lib/redis-server.mjs';
import { waitFor } from '../test/support/wait-for.js';
import { measure, Worker, type OrderedCase, type OrderedMeasurement } from './ordered.js';

type Log = (line: string) => void;

export const durabilitySizes = (smoke: boolean) => ({
  /** Emits per produce run, one at a time / 100 in flight. */
  sequential: smoke ? 200 : 5_000,
  sequentialFsync: smoke ? 3 : 20,
  concurrentFsync: smoke ? 200 : 2_000,
  concurrent: smoke ? 1_000 : 50_000,
  inFlight: 100,
  /** Entries per ordered drain, over 1,000 keys; with fsync fewer (each ack round waits for an fsync: a second with everysec). */
  drain: smoke ? 300 : 10_000,
  drainFsync: smoke ? 100 : 1_000,
  rounds: smoke ? 1 : 3,
});

export type DurableVariant = 'none' | 'replica' | 'replica-fsync';
const LABEL: Record<DurableVariant, string> = {
  none: 'none (default)',
  replica: '{ replicas: 1 }',
  'replica-fsync': '{ replicas: 1, fsync: true }',
};
const PRODUCE: Record<DurableVariant, Durability | false> = {
  none: false,
  replica: { replicas: 1, timeoutMs: 5000 },
  'replica-fsync': { replicas: 1, fsync: true, timeoutMs: 5000 },
};
// Below the ordered bench's leaseRenewMs (1000); with fsync, past `everysec`'s second (WAITAOF waits for the next fsync
// of the master and of the replica), and leaseRenewMs above it (FSYNC_LEASE_RENEW_MS).
const ACKS: Record<DurableVariant, DurableAcks | undefined> = {
  none: undefined,
  replica: { replicas: 1, timeoutMs: 500 },
  'replica-fsync': { replicas: 1, fsync: true, timeoutMs: 2500 },
};
const FSYNC_LEASE_RENEW_MS = 3000;

export interface DurabilitySection {
  smoke: boolean;
  server: string;
  sizes: ReturnType<typeof durabilitySizes>;
  variants: DurableVariant[];
  machine: { cores: number; loadAtStart: number; loadAtEnd: number };
  /** Emits per second per run, per variant. */
  sequential: Partial<Record<DurableVariant, number[]>>;
  concurrent: Partial<Record<DurableVariant, number[]>>;
  /** Waits the master ran per emit, 100 in flight (WAIT + WAITAOF calls / emits). */
  waitsPerEmit: Partial<Record<DurableVariant, number>>;
  drain: { handlerMs: number; runs: Partial<Record<DurableVariant, OrderedMeasurement[]>> }[];
  problems: string[];
}

export async function benchDurability(o: { smoke: boolean; log: Log }): Promise<DurabilitySection> {
  const sizes = durabilitySizes(o.smoke);
  const bin = hasBinary('redis8-server') ? 'redis8-server' : 'redis-server';
  const variants: DurableVariant[] = bin === 'redis8-server' ? ['none', 'replica', 'replica-fsync'] : ['none', 'replica'];
  const section: DurabilitySection = {
    smoke: o.smoke,
    server: bin,
    sizes,
    variants,
    machine: { cores: cpus().length, loadAtStart: loadavg()[0]!, loadAtEnd: NaN },
    sequential: {},
    concurrent: {},
    waitsPerEmit: {},
    drain: [],
    problems: [],
  };
  const dir = await mkdtemp(join(tmpdir(), 'bench-durability-'));
  const aof = ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir'];
  let master: RedisServerProcess | undefined;
  let replica: RedisServerProcess | undefined;
  let worker: Worker | undefined;
  const admin: Redis[] = [];
  try {
    master = await startRedisServer({ bin, args: [...aof, join(dir), '--appenddirname', 'm', '--dbfilename', 'm.rdb'] });
    replica = await startRedisServer({
      bin,
      args: [...aof, join(dir), '--appenddirname', 'r', '--dbfilename', 'r.rdb', '--replicaof', '127.0.0.1', String(master.port)],
    });
    const m = new Redis(master.url);
    admin.push(m);
    await waitFor(async () => Number(await m.call('WAIT', 1, 100)) === 1, { timeoutMs: 20_000, message: 'the replica synced' });
    o.log(`durability: ${bin} master and replica (AOF everysec), variants ${variants.join(', ')}`);

    // Produce: the variants take turns; each run a new stream. A first pass of the plain writes warms this process up (not recorded).
    if (!o.smoke) {
      const warm = new RedisStreamsClient({ connection: master.url, keyPrefix: 'warm:', telemetry: false });
      await warm.connect();
      for (let i = 0; i < sizes.sequential; i++) await lastValueFrom(warm.emit('seq', { i }));
      await warm.close();
      await m.flushall();
    }
    let turn = 0;
    for (let round = 0; round < sizes.rounds; round++) {
      const order = variants.map((_, i) => variants[(i + turn++) % variants.length]!);
      for (const v of order) {
        const client = new RedisStreamsClient({
          connection: master.url,
          keyPrefix: `d${round}${v}:`,
          durability: PRODUCE[v],
          telemetry: false,
        });
        await client.connect();
        await lastValueFrom(client.emit('warm', {}));
        let t = performance.now();
        // One at a time with fsync, each emit waits for the next fsync (everysec): a handful tells the rate.
        const sequential = v === 'replica-fsync' ? sizes.sequentialFsync : sizes.sequential;
        for (let i = 0; i < sequential; i++) await lastValueFrom(client.emit('seq', new RedisStreamsRecord({ i })));
        (section.sequential[v] ??= []).push((sequential / (performance.now() - t)) * 1000);
        const waitsBefore = await waits(m);
        t = performance.now();
        const concurrent = v === 'replica-fsync' ? sizes.concurrentFsync : sizes.concurrent;
        for (let done = 0; done < concurrent; done += sizes.inFlight)
          await Promise.all(Array.from({ length: sizes.inFlight }, (_, i) => lastValueFrom(client.emit('par', { i: done + i }))));
        (section.concurrent[v] ??= []).push((concurrent / (performance.now() - t)) * 1000);
        section.waitsPerEmit[v] = ((await waits(m)) - waitsBefore) / concurrent;
        await client.close();
        o.log(
          `durability: produce ${v}: ${Math.round(section.sequential[v]!.at(-1)!)} emits/s one at a time, ${Math.round(section.concurrent[v]!.at(-1)!)} with ${sizes.inFlight} in flight`,
        );
        await m.flushall();
      }
    }

    // The ordered drain: one worker, the variants taking turns.
    worker = await Worker.spawn({ url: master.url, consumer: 'w0' });
    for (const handlerMs of [0, 1]) {
      const caseOf = (v: DurableVariant): OrderedCase => ({
        keys: 1_000,
        workers: 1,
        handlerMs,
        start: 'warm',
        entries: v === 'replica-fsync' ? sizes.drainFsync : sizes.drain,
        runs: {},
      });
      const row = { handlerMs, runs: {} as Partial<Record<DurableVariant, OrderedMeasurement[]>> };
      section.drain.push(row);
      for (let round = 0; round < sizes.rounds; round++) {
        const order = variants.map((_, i) => variants[(i + turn++) % variants.length]!);
        for (const v of order) {
          const acks = ACKS[v];
          const c = caseOf(v);
          const r = await measure(
            m,
            [worker],
            c,
            'ordered',
            acks ? { durableAcks: acks, ...(acks.fsync ? { leaseRenewMs: FSYNC_LEASE_RENEW_MS } : {}) } : {},
          );
          (row.runs[v] ??= []).push(r);
          o.log(`durability: ordered drain, ${handlerMs ? '1 ms' : 'no-op'} handler, ${v}: ${Math.round(r.msgsPerSec)} msgs/s`);
          if (r.handled < c.entries) section.problems.push(`ordered drain ${v}: handled ${r.handled} of ${c.entries}`);
          if (r.outOfOrder + r.overlaps > 0)
            section.problems.push(`ordered drain ${v}: ${r.outOfOrder} out of order, ${r.overlaps} overlaps`);
        }
      }
    }
  } catch (err) {
    section.problems.push(String(err));
  } finally {
    section.machine.loadAtEnd = loadavg()[0]!;
    await worker?.exit();
    for (const a of admin) a.disconnect();
    await Promise.all([master?.stop(), replica?.stop()]);
    await rm(dir, { recursive: true, force: true });
  }
  return section;
}

async function waits(m: Redis): Promise<number> {
  const info = String(await m.call('INFO', 'commandstats'));
  return [...info.matchAll(/cmdstat_(wait|waitaof):calls=(\d+)/g)].reduce((sum, x) => sum + Number(x[2]), 0);
}

function hasBinary(bin: string): boolean {
  try {
    execFileSync(bin, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function durabilityMarkdown(s: DurabilitySection, smokeNote: string): string {
  const f = (v: number, d = 0) =>
    Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '—';
  const median = (xs: number[] | undefined) => (xs && xs.length > 0 ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : NaN);
  const ratio = (xs: Partial<Record<DurableVariant, number[]>>, v: DurableVariant) => median(xs[v]) / median(xs.none);
  const cell = (xs: Partial<Record<DurableVariant, number[]>>, v: DurableVariant) =>
    v === 'none' ? `${f(median(xs[v]))}/s` : `${f(median(xs[v]))}/s, **${f(ratio(xs, v), 2)}×**`;
  const drainRate = (r: DurabilitySection['drain'][number], v: DurableVariant) => median(r.runs[v]?.map((m) => m.msgsPerSec));
  const drainCell = (r: DurabilitySection['drain'][number], v: DurableVariant) =>
    v === 'none' ? `${f(drainRate(r, v))}/s` : `${f(drainRate(r, v))}/s, **${f(drainRate(r, v) / drainRate(r, 'none'), 2)}×**`;
  const head = `| | ${s.variants.map((v) => LABEL[v]).join(' | ')} |`;
  const rule = `| --- | ${s.variants.map(() => '---:').join(' | ')} |`;
  return [
    `## Durable settings: what they cost${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `A master and its replica (${s.server}, loopback, AOF on both with \`appendfsync everysec\`), on a machine of ${s.machine.cores} cores (1-minute load average ${f(s.machine.loadAtStart, 1)} at the start, ${f(s.machine.loadAtEnd, 1)} at the end). Ratios to the default measured in the same run; the variants take turns, ${s.sizes.rounds} run(s) each, medians.${s.server === 'redis-server' ? ' Redis 7.0 has no WAITAOF: the fsync column is left out.' : ''}`,
    '',
    head,
    rule,
    `| produce, one at a time (${f(s.sizes.sequential)} emits: each caller waits for its own answer) | ${s.variants.map((v) => cell(s.sequential, v)).join(' | ')} |`,
    `| produce, ${s.sizes.inFlight} in flight (${f(s.sizes.concurrent)} emits, ${f(s.sizes.concurrentFsync)} with fsync) | ${s.variants.map((v) => cell(s.concurrent, v)).join(' | ')} |`,
    `| waits the master ran per emit, ${s.sizes.inFlight} in flight | ${s.variants.map((v) => f(s.waitsPerEmit[v] ?? NaN, 3)).join(' | ')} |`,
    ...s.drain.map(
      (r) =>
        `| ordered drain, 1,000 keys, 4 partitions, 1 worker, ${r.handlerMs ? '1 ms' : 'no-op'} handler (\`durableAcks\`; ${f(s.sizes.drain)} entries, ${f(s.sizes.drainFsync)} with fsync) | ${s.variants.map((v) => drainCell(r, v)).join(' | ')} |`,
    ),
    '',
    `The produce rows set the client's \`durability\`; the drain rows the ordered pattern's \`durableAcks\` (timeoutMs 500; with fsync 2,500 and leaseRenewMs ${FSYNC_LEASE_RENEW_MS}). Emits begun together share one wait per slot (the waits-per-emit row); one at a time, each emit pays a replica round trip, and with fsync the next fsync of the master's and the replica's AOF: up to a second with \`appendfsync everysec\` (${s.sizes.sequentialFsync} emits one at a time in that column). \`appendfsync always\` answers a WAITAOF at once, and pays an fsync on every write instead.`,
    ...(s.problems.length > 0 ? ['', `Problems: ${s.problems.join('; ')}`] : []),
  ].join('\n');
}
