// Instructions per entry of a drain, counted from outside the consumer's code: they do not move with the machine's
// load, where msgs/s and CPU µs do. The bench child (bench/child.ts, mode drain) drains `n` fresh entries under a
// counter, which counts only from the handler's n1-th call to its n2-th: (I(n2) − I(n1)) / (n2 − n1) in one process,
// so start-up, module loading, the first reads' warm-up and the drain's end stay out of the figure. It covers the
// whole consumer process (its JavaScript, GC, ioredis, libuv, every thread), not redis-server. The counter: `perf
// stat` where the machine exposes the hardware counter, valgrind's callgrind otherwise (a hundred times slower and more).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SystemName } from './systems.js';
import { readInstructionProfile, WORK_KINDS, type InstructionProfile } from './instruction-profile.js';

export type InstructionCounter = 'perf' | 'callgrind';

export interface InstructionSizes {
  /** The window: from the handler's n1-th call to its n2-th. */
  n1: number;
  n2: number;
  /** Entries drained in all: past n2, so that the drain's end (its last batches, stop) stays out of the window. */
  n: number;
  /** How many times each system's drain runs: every run's figure is shown, so the reader sees the spread. */
  repeats: number;
}

/**
 * n1 = 4,000 is past the first reads' compilations (40 batches of 100; two-process differences that started at 2,000
 * still carried the Nest host's warm-up: 146,000 instructions per entry from 2,000 to 12,000 against 54,000 from
 * 12,000 to 22,000). 20,000 entries in the window: under callgrind they take 20–60 s on top of a ~35 s start.
 * A smoke run only checks that the counting completes.
 */
export const INSTRUCTION_SIZES = {
  full: { n1: 4_000, n2: 24_000, n: 25_000, repeats: 3 },
  smoke: { n1: 100, n2: 300, n: 400, repeats: 1 },
} as const;

/** How many counted children run at once (under callgrind each takes one core). */
const LANES = 2;

/**
 * Node's flags for a counted child. `--predictable` (V8: no background threads, no memory reducer, a fixed seed)
 * takes out V8's heuristics that run on the clock, such as a background compilation ending inside the window or
 * after it: under valgrind a drain lasts a hundred times longer and more, so they would weigh far more than in a
 * real run, and vary with the machine's load. `--expose-gc`: the child's full collection before its drain.
 */
const NODE_FLAGS = ['--predictable', '--expose-gc'];

/**
 * Each repeat's V8 seed (`--random-seed`, after `--predictable`'s fixed one): objects' identity hashes, and so the
 * probes of every WeakMap lookup, follow it. ioredis 6 reads its decoder's private fields (WeakMaps) per decoded
 * string: one seed cost the transport 1,232 instructions per entry more than the expert loop in those lookups, another
 * 612 less, with the same number of calls (2026-12-06). Repeats under different seeds, and their median, average that luck out.
 */
const seedFlag = (repeat: number): string => `--random-seed=${repeat + 1}`;

/**
 * The counter this machine offers: `perf stat` when `perf stat -e instructions:u true` prints a count (on many
 * virtual machines it prints `<not supported>`), else callgrind when valgrind runs; undefined (and why) otherwise.
 */
export function instructionCounter(): { counter: InstructionCounter } | { counter: undefined; why: string } {
  const perf = spawnSync('perf', ['stat', '-x', ',', '-e', 'instructions:u', 'true'], { encoding: 'utf8' });
  if (perf.status === 0 && /^\d+,/m.test(perf.stderr)) return { counter: 'perf' };
  const valgrind = spawnSync('valgrind', ['--version'], { encoding: 'utf8' });
  if (valgrind.status === 0) return { counter: 'callgrind' };
  return { counter: undefined, why: 'neither `perf stat -e instructions:u` nor valgrind works on this machine' };
}

/** How a counted child starts: the counter's command in front of node, node's flags, and the child's own arguments. */
export interface CountedLaunch {
  wrap: string[];
  nodeFlags: string[];
  childArgs: { n: number; count: { from: number; to: number; perfControl?: { ctl: string; ack: string } } };
}

/**
 * The counter's command and where its count lands. callgrind zeroes its counters when the child enters `uv_loadavg`
 * and writes them to `<out>.1` when it enters `uv_uptime` (the child's marks); perf starts with its counter off and
 * is switched on and off through its control fifos, in which the child writes at the same marks.
 */
function counted(
  counter: InstructionCounter,
  out: string,
  sizes: InstructionSizes,
  profile: boolean,
  repeat: number,
): CountedLaunch & { countFile: string } {
  const nodeFlags = [...NODE_FLAGS, seedFlag(repeat)];
  const window = { from: sizes.n1, to: sizes.n2 };
  if (counter === 'callgrind')
    return {
      wrap: [
        'valgrind',
        '-q',
        '--tool=callgrind',
        `--callgrind-out-file=${out}`,
        '--zero-before=uv_loadavg',
        '--dump-before=uv_uptime',
        // The profile: each instruction's cost at its address, for the perf map to name V8's generated code.
        ...(profile ? ['--dump-instr=yes'] : []),
      ],
      // --perf-basic-prof writes /tmp/perf-<pid>.map, and a V8 log (kept out of the working directory).
      nodeFlags: [...nodeFlags, ...(profile ? ['--perf-basic-prof', `--logfile=${out}.v8.log`, '--no-logfile-per-isolate'] : [])],
      childArgs: { n: sizes.n, count: window },
      countFile: `${out}.1`,
    };
  const ctl = `${out}.ctl`;
  const ack = `${out}.ack`;
  execFileSync('mkfifo', [ctl, ack]);
  return {
    // User space only, as callgrind counts; every thread of the process (perf stat follows them).
    wrap: ['perf', 'stat', '-x', ',', '-e', 'instructions:u', '-o', out, '--control', `fifo:${ctl},${ack}`, '-D', '-1', '--'],
    nodeFlags,
    childArgs: { n: sizes.n, count: { ...window, perfControl: { ctl, ack } } },
    countFile: out,
  };
}

/** The instruction count in the counter's file: callgrind's `summary:` (or `totals:`) line, perf's CSV line. */
export function readCount(counter: InstructionCounter, text: string): number {
  const match = counter === 'perf' ? /^(\d+),[^,\n]*,instructions/m.exec(text) : /^(?:summary|totals):\s+(\d+)/m.exec(text);
  if (!match) throw new Error(`bench: no instruction count in the ${counter} output: ${JSON.stringify(text.slice(0, 300))}`);
  return Number(match[1]);
}

export interface InstructionSystem<S extends string = SystemName> {
  system: S;
  /** With `--instructions-profile`: where the first drain's window went (bench/instruction-profile.ts). */
  profile?: InstructionProfile | undefined;
  /** Median of the repeats' figures (two: their mean). */
  perEntry: number;
  /** Each repeat's instructions per entry, in order. */
  runs: number[];
  /** Each repeat's full (major) collections that started inside the window. */
  majorGcs: number[];
}

export interface InstructionSection<S extends string = SystemName> extends InstructionSizes {
  /** undefined: not counted (`why` says why). */
  counter: InstructionCounter | undefined;
  why?: string;
  systems: InstructionSystem<S>[];
  minutes: number;
}

/** The section of a run that counted nothing. */
export const notCounted = <S extends string = SystemName>(why: string): InstructionSection<S> => ({
  n1: 0,
  n2: 0,
  n: 0,
  repeats: 0,
  counter: undefined,
  why,
  systems: [],
  minutes: 0,
});

/**
 * Counts every system's instructions per entry. `drain` runs one drain child of `childArgs.n` fresh entries of
 * `system`, started as `launch` says, and resolves with its report once it exited and was checked (every entry
 * handled once). A system may be any run that marks its window so (bench/count-window.ts): the telemetry section's
 * variants and the SDK's calls alone (bench/otel-calls.ts). `keepIn`: a folder that keeps the counter's files
 * (`<system>-<repeat>.<counter>.out*`; callgrind's window is the `.1` file, for callgrind_annotate).
 */
export async function countInstructions<S extends string>(o: {
  systems: readonly S[];
  smoke: boolean;
  log: (line: string) => void;
  drain: (system: S, launch: CountedLaunch) => Promise<{ majorGcs?: number; windowMs?: number; pid?: number }>;
  keepIn?: string;
  /** Profile each system's first drain (callgrind only): instructions per entry by kind of work and by function. */
  profile?: boolean;
}): Promise<InstructionSection<S>> {
  const sizes: InstructionSizes = o.smoke ? INSTRUCTION_SIZES.smoke : INSTRUCTION_SIZES.full;
  const found = instructionCounter();
  if (found.counter === undefined) {
    o.log(`instructions per entry: not counted (${found.why})`);
    return notCounted<S>(found.why);
  }
  const { counter } = found;
  const started = performance.now();
  const dir = o.keepIn ?? mkdtempSync(join(tmpdir(), 'bench-instructions-'));
  mkdirSync(dir, { recursive: true });
  // Repeat after repeat: every system has a figure before any has its second.
  const jobs = Array.from({ length: sizes.repeats }, (_, repeat) => o.systems.map((system) => ({ system, repeat }))).flat();
  const figures = new Map<S, { perEntry: number; majorGcs: number }[]>();
  const profile = o.profile === true && counter === 'callgrind';
  const profiles = new Map<S, InstructionProfile>();
  o.log(
    `instructions per entry (${counter}): ${o.systems.length} systems × ${sizes.repeats} drain(s) of ${sizes.n} entries, counted from entry ${sizes.n1} to ${sizes.n2}, ${LANES} at a time${counter === 'callgrind' ? ' (each ~35 s of start-up under valgrind on a quiet machine, then the drain a hundred times slower and more)' : ''}`,
  );
  let next = 0;
  let done = 0;
  const lane = async () => {
    for (let i = next++; i < jobs.length; i = next++) {
      const { system, repeat } = jobs[i]!;
      const out = join(dir, `${system}-${repeat + 1}.${counter}.out`);
      const t0 = performance.now();
      const profiled = profile && repeat === 0;
      const { countFile, ...launch } = counted(counter, out, sizes, profiled, repeat);
      const { majorGcs, windowMs, pid } = await o.drain(system, launch);
      const perEntry = readCount(counter, readFileSync(countFile, 'utf8')) / (sizes.n2 - sizes.n1);
      if (profiled && pid !== undefined) {
        profiles.set(system, readInstructionProfile(countFile, pid, sizes.n2 - sizes.n1));
        rmSync(`/tmp/perf-${pid}.map`, { force: true });
      }
      if (!o.keepIn) for (const suffix of ['', '.1', '.ctl', '.ack', '.v8.log']) rmSync(`${out}${suffix}`, { force: true });
      figures.set(system, [...(figures.get(system) ?? []), { perEntry, majorGcs: majorGcs ?? NaN }]);
      o.log(
        `  [${++done}/${jobs.length}] ${system}, repeat ${repeat + 1}: ${Math.round(perEntry).toLocaleString('en-US')} instructions / entry, ${majorGcs} full GC(s) in the window, which took ${((windowMs ?? NaN) / 1000).toFixed(1)} s (${((performance.now() - t0) / 1000).toFixed(0)} s in all)`,
      );
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  if (!o.keepIn) rmSync(dir, { recursive: true, force: true });
  return {
    ...sizes,
    counter,
    systems: o.systems.map((system) => {
      const runs = figures.get(system)!;
      return {
        system,
        profile: profiles.get(system),
        perEntry: middle(runs.map((r) => r.perEntry)),
        runs: runs.map((r) => r.perEntry),
        majorGcs: runs.map((r) => r.majorGcs),
      };
    }),
    minutes: Math.round((performance.now() - started) / 600) / 100,
  };
}

/** The median; of an even count, the mean of the middle two. */
function middle(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const half = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2;
}

/** The expert loop with the fewer instructions per entry: the instruction figures' reference. */
export function leanerLoop(section: InstructionSection, loops: readonly SystemName[]): { system: SystemName; value: number } | undefined {
  const counted = section.systems.filter((s) => loops.includes(s.system)).sort((a, b) => a.perEntry - b.perEntry);
  return counted[0] && { system: counted[0].system, value: counted[0].perEntry };
}

/** One paragraph on the method, for the report beside the table. */
export function instructionsMethod(s: InstructionSection): string {
  if (s.counter === undefined) return `Instructions per entry: not counted (${s.why ?? 'not asked for'}).`;
  const how =
    s.counter === 'callgrind'
      ? "`valgrind --tool=callgrind` (`perf stat -e instructions` is not supported on this machine; the count is the window's dump's `summary:` line)"
      : '`perf stat -e instructions:u`';
  const n = (v: number) => v.toLocaleString('en-US');
  return `Instructions per entry: each system drains ${n(s.n)} fresh entries in a process of its own, counted by ${how} from its handler's ${n(s.n1)}th call to its ${n(s.n2)}th, divided by ${n(s.n2 - s.n1)}: start-up, module loading, the first reads' compilations and the drain's end stay out. The whole consumer process is counted (its JavaScript, GC, ioredis, libuv, every thread), not redis-server; but not its work on the clock (the engine's beats), which the counter's slowness would inflate: node runs with \`--predictable\` after a full GC, and the child's timers of 50 ms or more are stretched a thousandfold. ${s.repeats === 1 ? 'One drain per system' : `${s.repeats} drains per system, each under its own V8 seed (\`--random-seed\` 1 to ${s.repeats}: identity hashes, and so ioredis' WeakMap lookups, cost more or less by the seed's luck): the median, each drain's figure in brackets`}; full GCs that started in the window are listed. Unlike msgs/s and CPU µs, the count hardly moves with the machine's load.`;
}

const all = (p: InstructionProfile): number => Object.values(p.byKind).reduce((a, b) => a + b, 0);
/** The lowest and highest of some fractions, as percentages ("6–11 %"). */
function spread(fractions: number[]): string {
  const pct = fractions.map((f) => Math.round(f * 100));
  const [lo, hi] = [Math.min(...pct), Math.max(...pct)];
  return lo === hi ? `${lo} %` : `${lo}–${hi} %`;
}

/** The profiles of a section as markdown: instructions per entry by kind of work (a column per system), then each system's top functions. */
export function profileMarkdown(s: InstructionSection): string[] {
  const profiled = s.systems.filter((x) => x.profile !== undefined);
  if (profiled.length === 0) return [];
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  const lines = [
    `Where the instructions of the counted window go (\`--instructions-profile\`: each system's first drain, callgrind's cost by function, V8's generated code named by node's \`--perf-basic-prof\` map), per entry:`,
    '',
    `| kind of work | ${profiled.map((x) => x.system).join(' | ')} |`,
    `| --- | ${profiled.map(() => '---:').join(' | ')} |`,
    ...WORK_KINDS.map((kind) => `| ${kind} | ${profiled.map((x) => n(x.profile!.byKind[kind])).join(' | ')} |`),
    `| all (callgrind's cost lines, its \`totals:\`) | ${profiled.map((x) => n(all(x.profile!))).join(' | ')} |`,
    `| callgrind's counter (its \`summary:\`, as the headline counts) | ${profiled.map((x) => n(x.profile!.counted)).join(' | ')} |`,
    '',
    `callgrind's cost lines come to ${spread(profiled.map((x) => all(x.profile!) / x.profile!.counted - 1))} more than its counter for the same drain (on drains, where V8 generates and drops code; a plain script's agree within 0.1 %): read the kinds as shares of the cost lines, and the headline as the counter's.`,
  ];
  for (const x of profiled) {
    lines.push('', `${x.system}, the functions with the most instructions per entry:`, '');
    for (const f of x.profile!.top) lines.push(`- ${n(f.perEntry)}: \`${f.name}\``);
  }
  return lines;
}
