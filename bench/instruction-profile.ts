// Where a drain's instructions go (`--instructions-profile`, with callgrind): the counted window's instructions by
// function, JavaScript included, summed into a few kinds of work, per entry. callgrind sees V8's generated code only
// as addresses; node's `--perf-basic-prof` writes a map of them (`/tmp/perf-<pid>.map`: start, size, name), and the
// window's file is written with `--dump-instr=yes`, so each instruction's cost has its address and the map names it.
import { readFileSync } from 'node:fs';

/** The kinds of work a profile sums into, in the order they are shown. */
export const WORK_KINDS = [
  "V8's optimizing compiler",
  'garbage collection',
  'ioredis (JavaScript)',
  'this transport (JavaScript)',
  'rxjs',
  'Nest (JavaScript)',
  "Node's own JavaScript",
  'other JavaScript (the bench, handlers)',
  "WeakMap / WeakSet builtins (ioredis' private fields)",
  'promise and microtask builtins',
  'other V8 builtins (property access, calls, allocation)',
  "V8's runtime (C++)",
  'Node and libuv (C++)',
  'libc and the rest',
] as const;
export type WorkKind = (typeof WORK_KINDS)[number];

export interface InstructionProfile {
  /** Instructions per entry of each kind of work. */
  byKind: Record<WorkKind, number>;
  /** The functions with the most instructions per entry (self cost), most first. */
  top: { name: string; perEntry: number }[];
  /**
   * callgrind's own counter for the window (its `summary:` line, what the headline counts), per entry. Its cost lines
   * (their sum is `byKind`'s, and its `totals:` line) come to 6–12 % more on a drain (seen 2026-12-06; a small
   * single-purpose script's agree within 0.1 %): the kinds are shares of the cost lines, not of the counter.
   */
  counted: number;
}

/** The kind of work of a function callgrind named `fn` (in object `ob`), or of JIT code the perf map names `jit`. */
function kindOf(fn: string, ob: string, jit: string | undefined): WorkKind {
  if (jit !== undefined) {
    if (!jit.startsWith('JS:')) return 'other V8 builtins (property access, calls, allocation)';
    if (jit.includes('/ioredis/')) return 'ioredis (JavaScript)';
    if (jit.includes('/rxjs/')) return 'rxjs';
    if (jit.includes('/@nestjs/')) return 'Nest (JavaScript)';
    if (jit.includes('/redis-streams/dist/') || jit.includes('/nestjs-redis-streams/')) return 'this transport (JavaScript)';
    if (/ node:/.test(jit)) return "Node's own JavaScript";
    return 'other JavaScript (the bench, handlers)';
  }
  if (fn.includes('v8::internal::compiler::') || fn.includes('v8::internal::maglev::')) return "V8's optimizing compiler";
  if (/Scaveng|MarkCompact|Marking|Sweeper|Evacuat|RememberedSet|v8::internal::Heap::|heap::base::/.test(fn)) return 'garbage collection';
  if (/^Builtins_(WeakMap|WeakSet|WeakCollection)/.test(fn)) return "WeakMap / WeakSet builtins (ioredis' private fields)";
  if (/^Builtins_.*(Promise|Microtask|Async|Await)/.test(fn)) return 'promise and microtask builtins';
  if (fn.startsWith('Builtins_')) return 'other V8 builtins (property access, calls, allocation)';
  if (fn.startsWith('v8::') || fn.includes(' v8::')) return "V8's runtime (C++)";
  if (fn.startsWith('node::') || fn.includes(' node::') || fn.startsWith('uv_') || fn.startsWith('uv__')) return 'Node and libuv (C++)';
  if (ob.endsWith('/node') || ob === 'node') return "V8's runtime (C++)";
  return 'libc and the rest';
}

/** The perf map: sorted starts, and each range's end and name. */
function readPerfMap(text: string): { starts: number[]; ends: number[]; names: string[] } {
  const rows = text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size, ...name] = line.split(' ');
      return { start: parseInt(start!, 16), end: parseInt(start!, 16) + parseInt(size!, 16), name: name.join(' ') };
    })
    .sort((a, b) => a.start - b.start);
  return { starts: rows.map((r) => r.start), ends: rows.map((r) => r.end), names: rows.map((r) => r.name) };
}

/** What the map names at `address` (the last range started at or before it, if it holds it). */
function nameAt(map: ReturnType<typeof readPerfMap>, address: number): string | undefined {
  let lo = 0;
  let hi = map.starts.length - 1;
  let at = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (map.starts[mid]! <= address) {
      at = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return at >= 0 && address < map.ends[at]! ? map.names[at] : undefined;
}

/**
 * The window's profile from callgrind's file (`--dump-instr=yes`) and node's perf map, per entry of the `entries`
 * counted. Self cost only: a call's line (after `calls=`) is the callee's inclusive cost, counted where it is spent.
 */
export function instructionProfile(callgrindOut: string, perfMap: string, entries: number, top = 12): InstructionProfile {
  const map = readPerfMap(perfMap);
  const names = { fn: new Map<string, string>(), ob: new Map<string, string>() };
  // `fn=(12) name` defines a name once; `fn=(12)` uses it again.
  const named = (kind: 'fn' | 'ob', value: string): string => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(value);
    if (!m) return value;
    if (m[2] !== undefined) names[kind].set(m[1]!, m[2]);
    return names[kind].get(m[1]!) ?? value;
  };
  let positions = 1;
  let fn = '';
  let ob = '';
  let afterCall = false;
  const position = [0, 0];
  const byFunction = new Map<string, { kind: WorkKind; cost: number }>();
  for (const line of callgrindOut.split('\n')) {
    if (line.startsWith('positions:')) positions = line.trim().split(/\s+/).length - 1;
    else if (line.startsWith('fn=')) fn = named('fn', line.slice(3));
    else if (line.startsWith('ob=')) ob = named('ob', line.slice(3));
    else if (line.startsWith('cfn=')) named('fn', line.slice(4));
    else if (line.startsWith('cob=')) named('ob', line.slice(4));
    else if (line.startsWith('calls=')) afterCall = true;
    else if (/^[0-9+\-*]/.test(line)) {
      const parts = line.split(' ');
      // Positions are absolute, `+n` / `-n` relative to the last, or `*` (the same).
      for (let i = 0; i < positions; i++) {
        const p = parts[i]!;
        if (p === '*') continue;
        if (p[0] === '+' || p[0] === '-') position[i]! += (p[0] === '-' ? -1 : 1) * Number(p.slice(1));
        else position[i] = Number(p);
      }
      if (afterCall) {
        afterCall = false;
        continue;
      }
      const cost = Number(parts[positions] ?? 0);
      // Code callgrind found no symbol for: V8's generated code, named by the perf map (`'2`: callgrind's recursion mark).
      const unnamed = /^0x[0-9a-f]+(?:'\d+)?$/i.test(fn) || fn === '???';
      // Unnamed by the map too: V8's builtins copied next to the generated code (its short builtin calls).
      const jit = unnamed ? (nameAt(map, position[0]!) ?? 'code neither callgrind nor the perf map names') : undefined;
      const key = jit ?? `${fn}  [${ob.replace(/.*\//, '')}]`;
      const row = byFunction.get(key) ?? byFunction.set(key, { kind: kindOf(fn, ob, jit), cost: 0 }).get(key)!;
      row.cost += cost;
    }
  }
  const byKind = Object.fromEntries(WORK_KINDS.map((k) => [k, 0])) as Record<WorkKind, number>;
  for (const { kind, cost } of byFunction.values()) byKind[kind] += cost / entries;
  const summary = /^summary:\s+(\d+)/m.exec(callgrindOut);
  return {
    byKind,
    counted: summary ? Number(summary[1]) / entries : NaN,
    top: [...byFunction]
      .sort((a, b) => b[1].cost - a[1].cost)
      .slice(0, top)
      .map(([name, { cost }]) => ({ name: shortName(name), perEntry: cost / entries })),
  };
}

/** A function's name without the checkout's path, C++ template arguments or callgrind's recursion mark, at most 120 characters. */
function shortName(name: string): string {
  let short = name
    .replace(/file:\/\/\S*?\/dist\/esm\//, 'nestjs-redis-streams/')
    .replace(/\S*\/node_modules\//, '')
    .replace(/file:\/\/\S*\/bench-build\//, '')
    .replace(/'\d+(?=\s|$)/, '');
  // Nested template arguments, innermost first.
  for (let before = ''; before !== short;) [before, short] = [short, short.replace(/<[^<>]*>/g, '')];
  return short.length > 120 ? `${short.slice(0, 119)}…` : short;
}

/** Reads a profile's two files (see instructionProfile). */
export function readInstructionProfile(callgrindFile: string, pid: number, entries: number): InstructionProfile {
  return instructionProfile(readFileSync(callgrindFile, 'utf8'), readFileSync(`/tmp/perf-${pid}.map`, 'utf8'), entries);
}
