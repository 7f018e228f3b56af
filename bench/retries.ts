// The retry section of `npm run bench` (`--only retries` alone): three measurements, each against its
// reference measured in the same run on the same throwaway redis-server, printed as figures and ratios.
// 1. A failing downstream: a backlog where 10 % of entries fail twice, with a 50 ms retry policy, without
//    one (they come back once idle), and with nothing failing. 2. On time: an idle consumer's retries,
//    lateness on the server clock against their due time. 3. No head-of-line blocking: new entries'
//    latency while 10,000 entries wait for their retry, against the same run with none waiting.
// Nothing here asserts a figure: it is a measurement; `problems()` only checks that every run completed.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import type { RetryPolicy } from 'nestjs-redis-streams';
import { waitFor } from '../test/support/wait-for.js';
import type { RetryChildArgs, RetryChildReport } from './retry-child.js';

const CHILD = fileURLToPath(new URL('./retry-child.js', import.meta.url));
const GROUP = 'bench';
const BATCH = 100;

export const retrySizes = (smoke: boolean) => ({
  /** 1: backlog drained per run, rounds (the three variants take turns, the order rotating). */
  downstream: smoke ? 300 : 20_000,
  downstreamRounds: smoke ? 1 : 3,
  /** 1: minIdleMs of every variant (the no-policy one's failed entries return once idle minIdleMs − leaseRenewMs). */
  downstreamMinIdleMs: smoke ? 1000 : 2000,
  /** 2: entries, each failing once, written one every `onTimeSpacingMs`, delays spread from 50 ms to this. */
  onTime: smoke ? 10 : 200,
  onTimeMaxDelayMs: smoke ? 1000 : 5000,
  onTimeSpacingMs: 25,
  /** 3: entries waiting for a retry `waitDelayMs` away, then new entries at `rate`/s for `seconds`. */
  waiting: smoke ? 200 : 10_000,
  waitDelayMs: 60_000,
  holMinIdleMs: 2000,
  /** 3: entries handled (and acked) before the heap baseline. */
  warmUp: smoke ? 100 : 1000,
  rate: 500,
  seconds: smoke ? 1 : 4,
  holRounds: smoke ? 1 : 3,
});
export type RetrySizes = ReturnType<typeof retrySizes>;

type Variant = 'no failure' | 'retry: fixed 50 ms' | 'no retry policy';
interface DownstreamRun {
  ms: number;
  msgsPerSec: number;
}
interface HolRun {
  p50: number;
  p99: number;
  delivered: number;
  sent: number;
  heapBefore: number;
  heapAfter: number;
  gc: boolean;
  /** Entries still waiting when the run ended (all of them: none retried early). */
  stillWaiting: number;
}
export interface RetrySection {
  smoke: boolean;
  sizes: RetrySizes;
  downstream: { variant: Variant; runs: DownstreamRun[] }[];
  onTime: { delays: number[]; lateness: number[]; within: number };
  hol: { waiting: HolRun[]; reference: HolRun[] };
}

export async function benchRetries(o: { smoke: boolean; url: string; log: (line: string) => void }): Promise<RetrySection> {
  const sizes = retrySizes(o.smoke);
  const bench = new Bench(o.url, sizes);
  try {
    // A smoke run measures nothing: its three parts go at once (three processes at a time), to keep it short.
    const parts = [() => bench.downstream(o.log), () => bench.onTime(o.log), () => bench.hol(o.log)] as const;
    const [downstream, onTime, hol] = o.smoke
      ? await Promise.all(parts.map((p) => p()))
      : [await parts[0](), await parts[1](), await parts[2]()];
    return { smoke: o.smoke, sizes, downstream, onTime, hol } as RetrySection;
  } finally {
    bench.close();
  }
}

/** One retry-child process: its progress lines kept, its commands on stdin. */
class Child {
  ready = false;
  progress = 0;
  failed = 0;
  settledAt: number | undefined;
  heaps: { heapUsed: number; gc: boolean }[] = [];
  report: RetryChildReport | undefined;
  readonly proc: ChildProcess;

  constructor(args: RetryChildArgs, nodeFlags: string[] = []) {
    this.proc = spawn(process.execPath, [...nodeFlags, CHILD, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
    LIVE.add(this.proc);
    this.proc.once('exit', () => LIVE.delete(this.proc));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.ready) this.ready = true;
      if (msg.progress !== undefined) [this.progress, this.failed] = [msg.progress, msg.failed];
      if (msg.settledAt !== undefined) this.settledAt = msg.settledAt;
      if (msg.heapUsed !== undefined) this.heaps.push(msg);
      if (msg.succeeded !== undefined) this.report = msg;
    });
  }

  async started(): Promise<this> {
    await waitFor(() => this.ready, { timeoutMs: 30_000, message: 'retry child ready' });
    return this;
  }

  async heap(): Promise<{ heapUsed: number; gc: boolean }> {
    const seen = this.heaps.length;
    this.proc.stdin!.write('heap\n');
    await waitFor(() => this.heaps.length > seen, { timeoutMs: 20_000, message: 'heap figure' });
    return this.heaps.at(-1)!;
  }

  /** Stops it (a graceful close) and returns its report. */
  async finish(): Promise<RetryChildReport> {
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdin!.write('report\n');
    await waitFor(() => this.report, { timeoutMs: 60_000, message: 'retry child report' });
    await exited;
    return this.report!;
  }
}
const LIVE = new Set<ChildProcess>();
process.on('exit', () => LIVE.forEach((c) => c.kill('SIGKILL')));

class Bench {
  private readonly admin: Redis;
  private uniq = 0;

  constructor(
    private readonly url: string,
    private readonly sizes: RetrySizes,
  ) {
    this.admin = new Redis(url);
  }

  close(): void {
    this.admin.disconnect();
  }

  private async freshStream(what: string): Promise<string> {
    const key = `bench-retries-${what}-${++this.uniq}`;
    await this.admin.xgroup('CREATE', key, GROUP, '0', 'MKSTREAM');
    return key;
  }

  private async drop(key: string): Promise<void> {
    await this.admin.del(key, `${key}:retry:${GROUP}`, `${key}:dead`);
  }

  private async append(key: string, count: number, fields: (i: number) => string[]): Promise<void> {
    for (let i = 0; i < count; i += 1000) {
      const p = this.admin.pipeline();
      for (let j = i; j < Math.min(count, i + 1000); j++) p.xadd(key, '*', ...fields(j));
      await p.exec();
    }
  }

  /** 1: each variant drains the same backlog, the variants taking turns, round after round. */
  async downstream(log: (line: string) => void): Promise<RetrySection['downstream']> {
    log('retries 1: a failing downstream (10 % of entries fail their first two deliveries)');
    const variants: Variant[] = ['no failure', 'retry: fixed 50 ms', 'no retry policy'];
    const runs = new Map<Variant, DownstreamRun[]>(variants.map((v) => [v, []]));
    for (let round = 0; round < this.sizes.downstreamRounds; round++) {
      const order = [...variants.slice(round % 3), ...variants.slice(0, round % 3)];
      const one = async (variant: Variant) => {
        const run = await this.drainOnce(variant);
        runs.get(variant)!.push(run);
        log(`  round ${round + 1} ${variant}: ${Math.round(run.ms)} ms, ${Math.round(run.msgsPerSec)} msgs/s`);
      };
      for (const variant of order) await one(variant);
    }
    return variants.map((variant) => ({ variant, runs: runs.get(variant)! }));
  }

  private async drainOnce(variant: Variant): Promise<DownstreamRun> {
    const n = this.sizes.downstream;
    const key = await this.freshStream('downstream');
    await this.append(key, n, (i) => ['n', String(i)]);
    const retry: RetryPolicy | undefined = variant === 'retry: fixed 50 ms' ? { backoff: { type: 'fixed', delayMs: 50 } } : undefined;
    const child = await new Child({
      url: this.url,
      key,
      group: GROUP,
      mode: 'downstream',
      failing: variant !== 'no failure',
      minIdleMs: this.sizes.downstreamMinIdleMs,
      batchSize: BATCH,
      n,
      ...(retry ? { retry } : {}),
    }).started();
    await waitFor(() => child.settledAt !== undefined, { timeoutMs: 300_000, message: `${variant}: every entry settled` });
    const report = await child.finish();
    const dead = await this.admin.xlen(`${key}:dead`);
    await this.drop(key);
    if (report.succeeded !== n || dead !== 0)
      throw new Error(`bench retries, ${variant}: ${report.succeeded} of ${n} entries succeeded, ${dead} dead-lettered`);
    const ms = child.settledAt! - report.firstAt;
    return { ms, msgsPerSec: (n / ms) * 1000 };
  }

  /** 2: entries written one at a time to an idle consumer, each retried once after its own delay. */
  async onTime(log: (line: string) => void): Promise<RetrySection['onTime']> {
    const { onTime: m, onTimeMaxDelayMs: max, onTimeSpacingMs } = this.sizes;
    log(`retries 2: on time (${m} entries failing once, delays 50 ms … ${max} ms, an idle consumer)`);
    // Log-spaced from 50 ms to `max`, in a shuffled order: short and long waits overlap.
    const delays = Array.from({ length: m }, (_, i) => Math.round(50 * (max / 50) ** (i / Math.max(1, m - 1))));
    for (let i = delays.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [delays[i], delays[j]] = [delays[j]!, delays[i]!];
    }
    const key = await this.freshStream('ontime');
    // Far above every delay: a retry on time cannot be the idle-time reclaim.
    const child = await new Child({ url: this.url, key, group: GROUP, mode: 'ontime', minIdleMs: 60_000, batchSize: BATCH }).started();
    for (const delay of delays) {
      await this.admin.xadd(key, '*', 'delay', String(delay));
      await new Promise((resolve) => setTimeout(resolve, onTimeSpacingMs));
    }
    await waitFor(() => child.progress >= m, { timeoutMs: 60_000 + max, message: 'every retry' });
    const report = await child.finish();
    await this.drop(key);
    if (report.retries.length !== m) throw new Error(`bench retries, on time: ${report.retries.length} of ${m} retries timed`);
    const lateness = report.retries.map(([, due, at]) => at - due);
    const within = report.retries.filter(([delay, due, at]) => at - due <= Math.max(50, delay * 0.05)).length / m;
    const sorted = [...lateness].sort((a, b) => a - b);
    log(`  lateness p50 ${percentile(sorted, 0.5)} ms, max ${sorted.at(-1)} ms; ${(within * 100).toFixed(1)} % within max(50 ms, 5 %)`);
    return { delays: report.retries.map(([delay]) => delay), lateness, within };
  }

  /**
   * New entries at `rate`/s for `seconds`, field `t` = this clock when written: a burst every 10 ms on a
   * schedule (a late burst does not delay the rest), one pipeline each. Written from here, not
   * bench/producer.ts: the same in both runs, and two process starts fewer per run.
   */
  private async paced(key: string, rate: number, seconds: number): Promise<number> {
    const burst = Math.max(1, Math.round(rate / 100));
    const total = rate * seconds;
    const firstAt = performance.now();
    let sent = 0;
    for (let i = 0; sent < total; i++) {
      const wait = firstAt + i * 10 - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const p = this.admin.pipeline();
      for (let j = 0; j < Math.min(burst, total - sent); j++) p.xadd(key, '*', 't', String(performance.timeOrigin + performance.now()));
      await p.exec();
      sent += Math.min(burst, total - sent);
    }
    return sent;
  }

  /** 3: new entries at a fixed rate, with `waiting` entries waiting for their retry and with none; the two take turns. */
  async hol(log: (line: string) => void): Promise<RetrySection['hol']> {
    const { waiting, rate, seconds } = this.sizes;
    log(`retries 3: no head-of-line blocking (${rate}/s new entries for ${seconds} s, ${waiting} waiting vs none)`);
    const result: RetrySection['hol'] = { waiting: [], reference: [] };
    for (let round = 0; round < this.sizes.holRounds; round++) {
      const one = async (withWaiting: boolean) => {
        const run = await this.holOnce(withWaiting ? waiting : 0);
        (withWaiting ? result.waiting : result.reference).push(run);
        log(`  round ${round + 1} ${withWaiting ? `${waiting} waiting` : 'none waiting'}: p50 ${run.p50} ms, p99 ${run.p99} ms`);
      };
      const order = round % 2 === 0 ? [true, false] : [false, true];
      for (const withWaiting of order) await one(withWaiting);
    }
    return result;
  }

  private async holOnce(waiting: number): Promise<HolRun> {
    const { rate, seconds, waitDelayMs, holMinIdleMs, warmUp } = this.sizes;
    const key = await this.freshStream('hol');
    const args: RetryChildArgs = {
      url: this.url,
      key,
      group: GROUP,
      mode: 'hol',
      // minIdleMs 2 s: the waiting entries' idle is renewed several times during the measurement.
      minIdleMs: holMinIdleMs,
      batchSize: BATCH,
      retry: { backoff: { type: 'fixed', delayMs: waitDelayMs } },
    };
    const child = await new Child(args, ['--expose-gc']).started();
    // Warmed up (entries read, handled, acked) before the heap baseline: code paths compiled once do not count as waiting cost.
    await this.append(key, warmUp, () => ['warm', '1']);
    await waitFor(() => child.progress >= warmUp, { timeoutMs: 60_000, message: 'the warm-up entries' });
    const before = await child.heap();
    await this.append(key, waiting, () => ['w', '1']);
    await waitFor(async () => child.failed >= waiting && (await this.admin.zcard(`${key}:retry:${GROUP}`)) === waiting, {
      timeoutMs: 120_000,
      message: `${waiting} entries waiting for their retry`,
    });
    const after = await child.heap();
    const sent = await this.paced(key, rate, seconds);
    await waitFor(() => child.progress >= warmUp + sent, { timeoutMs: 120_000, message: 'the new entries handled' });
    const stillWaiting = await this.admin.zcard(`${key}:retry:${GROUP}`);
    const report = await child.finish();
    await this.drop(key);
    const sorted = [...report.latencies].sort((a, b) => a - b);
    return {
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      delivered: sorted.length,
      sent,
      heapBefore: before.heapUsed,
      heapAfter: after.heapUsed,
      gc: before.gc,
      stillWaiting,
    };
  }
}

export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export const median = (values: number[]): number =>
  percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
