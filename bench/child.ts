// One system under test in its own process, so peak RSS and round trips are its own.
// Modes: drain (consume `n` preloaded entries, report time and costs), consume (report latencies on "report")
// and share (one of several processes draining one backlog together: the parent says "go" and "report").
import { Redis } from 'ioredis';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { countWindow, type CountWindow } from './count-window.js';
import { registerOtelSdk } from './otel-sdk.js';
import { startConsumer, type ConsumerOptions, type SystemName } from './systems.js';

interface Args extends ConsumerOptions {
  mode: 'drain' | 'consume' | 'share';
  system: SystemName;
  n?: number;
  /** Simulated I/O per message, in ms. */
  ioMs?: number;
  /** Count round trips and sample allocations (slower: a separate run). */
  profile?: boolean;
  /** Run with `@opentelemetry/api` unresolvable (the parent adds the hook that hides it). */
  hideOtel?: boolean;
  /** Register an OpenTelemetry SDK (spans and metrics recorded, exported nowhere), as an app that traces would. */
  otelSdk?: boolean;
  /** With otelSdk: the SDK's default parent-based sampler (follows the producer's sampled flag), or always on. */
  otelSampler?: 'parent' | 'always';
  /** consume: also time each entry's stages (its XREADGROUP reply reaching JavaScript, its handler). */
  stages?: boolean;
  /** drain: mark the window an instruction counter counts (bench/instructions.ts). */
  count?: CountWindow;
  /**
   * drain: also report the drain from the handler's `warmFrom`-th call on (`warm`): the rate of a consumer whose code
   * V8 has compiled and optimized by then, as in a worker that has been running for a while.
   */
  warmFrom?: number;
}

const args = JSON.parse(process.argv[2]!) as Args;
const now = () => performance.timeOrigin + performance.now();
const emit = (value: unknown, then?: () => void) => process.stdout.write(JSON.stringify(value) + '\n', then);

// Round trips: every command sent on its own, plus one per pipeline (MULTI included). The child's
// own admin connection (it polls XPENDING to see the drain end) is not counted.
const counters = { commands: 0, roundTrips: 0 };
const uncounted = new WeakSet<Redis>();
type SendCommand = (this: Redis, ...args: unknown[]) => unknown;
const proto = Redis.prototype as unknown as { sendCommand: SendCommand };
if (args.profile) {
  const seen = new WeakSet<object>();
  const original = proto.sendCommand;
  proto.sendCommand = function (this: Redis, ...args: unknown[]) {
    if (!uncounted.has(this)) {
      const stream = args[1] as object | undefined;
      counters.commands++;
      if (!stream) counters.roundTrips++;
      else if (!seen.has(stream)) {
        seen.add(stream);
        counters.roundTrips++;
      }
    }
    return original.apply(this, args);
  };
}

// Stages (consume mode): when each entry's XREADGROUP reply reached JavaScript, by the producer's
// timestamp `t` (unique per entry), and how many entries each read returned.
const arrivals = new Map<string, number>();
const reads: number[] = [];
if (args.stages) {
  const original = proto.sendCommand;
  proto.sendCommand = function (this: Redis, ...args: unknown[]) {
    const command = args[0] as { name: string; promise: Promise<unknown> };
    const result = original.apply(this, args);
    if (command.name.toLowerCase() === 'xreadgroup') {
      command.promise.then(
        (reply) => {
          const at = now();
          let count = 0;
          for (const entries of streamItems(reply)) {
            for (const [, fields] of entries) {
              count++;
              if (fields) arrivals.set(fields[fields.indexOf('t') + 1]!, at);
            }
          }
          reads.push(count);
        },
        () => undefined,
      );
    }
    return result;
  };
}

/** The entries of a read reply per stream, in the three shapes ioredis hands out (RESP2, RESP3 legacy-flattened, RESP3 map). */
function streamItems(reply: unknown): [string, string[] | null][][] {
  if (reply === null || reply === undefined) return [];
  if (Array.isArray(reply)) {
    if (reply.every((s) => Array.isArray(s) && s.length === 2 && Array.isArray(s[1]))) return reply.map((s) => s[1]);
    return reply.filter((_, i) => i % 2 === 1);
  }
  return [...(reply instanceof Map ? reply.values() : Object.values(reply as object))];
}

/** Whether this process can load `@opentelemetry/api` (the telemetry bench checks its variants are what they claim). */
const otelApi = await import('@opentelemetry/api').then(
  () => true,
  () => false,
);
if (args.otelSdk) await registerOtelSdk(args.otelSampler ?? 'parent');
if (args.count) stretchTimers();

/**
 * A counted drain runs some hundreds of times slower than a real one (valgrind; a shared machine), so the work done
 * on the clock (the engine's reclaim sweep, lease renewals, pause checks: about 3.6 M instructions a second when
 * idle) would weigh hundreds of times more per entry than in a real drain (about 36 instructions per entry at
 * 100,000 entries/s), and vary with the machine's load. Timers of 50 ms or more are stretched a thousandfold, out of
 * the window; shorter ones (waits inside a loop) are left alone.
 */
function stretchTimers(): void {
  const stretch = (ms: number | undefined) => (ms !== undefined && ms >= 50 ? ms * 1000 : ms);
  const { setTimeout: timeout, setInterval: every } = globalThis;
  globalThis.setTimeout = Object.assign(
    (callback: (...a: unknown[]) => void, ms?: number, ...rest: unknown[]) => timeout(callback, stretch(ms), ...rest),
    timeout,
  ) as typeof setTimeout;
  globalThis.setInterval = Object.assign(
    (callback: (...a: unknown[]) => void, ms?: number, ...rest: unknown[]) => every(callback, stretch(ms), ...rest),
    every,
  ) as typeof setInterval;
}

async function drain(): Promise<void> {
  const n = args.n!;
  let handled = 0;
  const admin = new Redis(args.url);
  uncounted.add(admin);
  const session = args.profile ? new Session() : undefined;
  if (session) {
    session.connect();
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    } as never);
  }
  // From the first message handled, so that a framework's boot time is not counted as throughput.
  let start = 0;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  const { warmFrom } = args;
  if (warmFrom !== undefined && !(0 < warmFrom && warmFrom < n)) throw new Error(`bench child: warmFrom ${warmFrom} outside 1..${n - 1}`);
  let warmStart = 0;
  let cpuAtWarm: NodeJS.CpuUsage | undefined;
  const window = args.count && countWindow(args.count, args.n!);
  let allHandled!: () => void;
  const handledAll = new Promise<void>((resolve) => (allHandled = resolve));
  const consumer = await startConsumer(args.system, args, async () => {
    if (handled++ === 0) {
      start = now();
      cpuAtStart = process.cpuUsage();
    }
    if (handled === warmFrom) {
      warmStart = now();
      cpuAtWarm = process.cpuUsage();
    }
    if (window && (handled === window.from || handled === window.to)) window.mark(handled === window.from);
    if (handled === n) allHandled();
    if (args.ioMs) await sleep(args.ioMs);
  });
  // Done = every message handled and acknowledged (nothing pending / waiting). No timer runs before the
  // last entry is handled: a poll every 5 ms would add work in proportion to wall time, not to entries
  // (under valgrind, where a drain takes minutes, it would show in the instructions per entry).
  await handledAll;
  while (!(await settled(admin))) await sleep(5);
  const end = now();
  const ms = end - start;
  const cpu = process.cpuUsage(cpuAtStart);
  const warmCpu = cpuAtWarm && process.cpuUsage(cpuAtWarm);
  let bytesPerEntry: number | undefined;
  if (session) {
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: Node } };
    bytesPerEntry = Math.round(totalSelfSize(profile.head) / n);
    // Where the bytes were allocated, for a closer look (e.g. per function).
    if (process.env.BENCH_HEAP_PROFILE) writeFileSync(process.env.BENCH_HEAP_PROFILE, JSON.stringify(profile));
  }
  const { roundTrips, commands } = counters;
  await consumer.stop();
  admin.disconnect();
  emit(
    {
      ms,
      // After stop: an entry handled twice (or one more delivered and handled late) shows here.
      handled,
      msgsPerSec: (n / ms) * 1000,
      // The consumer process's own CPU (user + system) per entry: steadier than wall time on a shared machine.
      cpuUsPerEntry: (cpu.user + cpu.system) / n,
      peakRssMb: process.resourceUsage().maxRSS / 1024,
      otelApi,
      // The entries after the warm-up: the handler's warmFrom-th call (its entry included) to the last acked.
      ...(warmFrom !== undefined && warmCpu
        ? {
            warm: {
              msgsPerSec: ((n - warmFrom + 1) / (end - warmStart)) * 1000,
              cpuUsPerEntry: (warmCpu.user + warmCpu.system) / (n - warmFrom + 1),
            },
          }
        : {}),
      ...(window ? { majorGcs: window.majorGcs(), windowMs: window.ms(), pid: process.pid } : {}),
      ...(args.profile ? { roundTripsPer1k: (roundTrips / n) * 1000, commandsPer1k: (commands / n) * 1000, bytesPerEntry } : {}),
    },
    // A counted child's stretched timers must not hold it for minutes after its report.
    window ? () => process.exit(0) : undefined,
  );
}

async function settled(admin: Redis): Promise<boolean> {
  if (args.system === 'bullmq') {
    const counts = await admin.multi().llen(`bull:${args.key}:wait`).llen(`bull:${args.key}:active`).exec();
    return counts!.every(([, c]) => Number(c) === 0);
  }
  const summary = (await admin.xpending(args.key, args.group)) as [number];
  return Number(summary[0]) === 0;
}

interface Node {
  selfSize: number;
  children: Node[];
}
function totalSelfSize(node: Node): number {
  return node.children.reduce((sum, child) => sum + totalSelfSize(child), node.selfSize);
}

async function consume(): Promise<void> {
  const latencies: number[] = [];
  /** With `stages`: per entry, [producer → reply in JavaScript, reply in JavaScript → handler] ms. */
  const stages: [number, number][] = [];
  let last = 0;
  let cpuAtFirst: NodeJS.CpuUsage | undefined;
  const consumer = await startConsumer(args.system, args, async (message) => {
    const t = Number(message.t);
    last = now();
    cpuAtFirst ??= process.cpuUsage();
    if (t) latencies.push(last - t);
    if (args.stages && t) {
      const at = arrivals.get(String(message.t));
      if (at !== undefined) stages.push([at - t, last - at]);
    }
    if (args.ioMs) await sleep(args.ioMs);
  });
  emit({ ready: true });
  const progress = setInterval(() => emit({ progress: latencies.length }), 100);
  const stop = async (report: boolean) => {
    clearInterval(progress);
    await consumer.stop();
    // Exit only once the (large) report line is flushed to the pipe.
    const round = (l: number) => Math.round(l * 100) / 100;
    // Its CPU (user + system) from its first entry on.
    const cpu = process.cpuUsage(cpuAtFirst);
    const extra = args.stages ? { stages: stages.map(([a, b]) => [round(a), round(b)]), reads } : {};
    if (report)
      emit(
        {
          latencies: latencies.map(round),
          last,
          cpuUs: cpuAtFirst ? cpu.user + cpu.system : 0,
          peakRssMb: process.resourceUsage().maxRSS / 1024,
          ...extra,
        },
        () => process.exit(0),
      );
    else process.exit(0);
  };
  createInterface({ input: process.stdin }).on('line', (line) => line.trim() === 'report' && void stop(true));
  process.once('SIGTERM', () => void stop(false));
}

/**
 * One consumer process of a group drain the parent times: built (Nest app initialised) before
 * the parent's "go", so that every process starts reading at about the same moment; reports
 * how many entries it handled (every 5 ms while that changes), and on "report" when it handled
 * its first one and the CPU it used since.
 */
async function share(): Promise<void> {
  let handled = 0;
  let first = 0;
  let cpuAtFirst: NodeJS.CpuUsage | undefined;
  const lines = createInterface({ input: process.stdin });
  const go = new Promise<void>((resolve) => lines.on('line', (line) => line.trim() === 'go' && resolve()));
  const reported = new Promise<void>((resolve) => lines.on('line', (line) => line.trim() === 'report' && resolve()));
  const consumer = await startConsumer(
    args.system,
    args,
    () => {
      if (handled++ === 0) {
        first = now();
        cpuAtFirst = process.cpuUsage();
      }
    },
    async () => {
      emit({ ready: true });
      await go;
    },
  );
  let told = 0;
  const progress = setInterval(() => handled !== told && emit({ progress: (told = handled) }), 5);
  await reported;
  const cpu = process.cpuUsage(cpuAtFirst);
  clearInterval(progress);
  await consumer.stop();
  emit({ handled, first, cpuUs: cpuAtFirst ? cpu.user + cpu.system : 0, peakRssMb: process.resourceUsage().maxRSS / 1024 }, () =>
    process.exit(0),
  );
}

await (args.mode === 'drain' ? drain() : args.mode === 'share' ? share() : consume());
