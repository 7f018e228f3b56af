// The window of a run whose instructions are counted (bench/instructions.ts), marked from inside the counted process.
import { openSync, readSync, writeSync } from 'node:fs';
import { loadavg, uptime } from 'node:os';
import { constants, PerformanceObserver } from 'node:perf_hooks';

/**
 * The window of a run whose instructions are counted: from its `from`-th entry to its `to`-th. At each mark the
 * process calls a libuv function nothing else in it calls, which callgrind is told to trigger on
 * (`--zero-before=uv_loadavg`, `--dump-before=uv_uptime`), and with `perfControl` it writes `enable` / `disable`
 * to `perf stat --control`'s fifo and waits for perf's ack. A full collection runs before the work starts
 * (node runs with `--expose-gc`), so that start-up's garbage is not collected inside the window; the full
 * collections that start inside it are reported, and how long the window took.
 */
export interface CountWindow {
  from: number;
  to: number;
  perfControl?: { ctl: string; ack: string };
}

/** Collects start-up's garbage, then marks the window's ends for the counter and counts the full GCs inside it. */
export function countWindow({ from, to, perfControl }: CountWindow, n: number) {
  if (!(0 < from && from < to && to <= n)) throw new Error(`bench: count window ${from}..${to} outside 1..${n}`);
  (globalThis as { gc?: () => void }).gc!();
  const control = perfControl && { ctl: openSync(perfControl.ctl, 'w'), ack: openSync(perfControl.ack, 'r') };
  const marks: number[] = [];
  const fullGcs: number[] = [];
  new PerformanceObserver((list) => {
    for (const gc of list.getEntries()) {
      const { detail } = gc as unknown as { detail?: { kind?: number } };
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) fullGcs.push(gc.startTime);
    }
  }).observe({ entryTypes: ['gc'] });
  return {
    from,
    to,
    mark(start: boolean) {
      marks.push(performance.now());
      if (start) loadavg();
      else uptime();
      if (control) {
        writeSync(control.ctl, start ? 'enable\n' : 'disable\n');
        readSync(control.ack, Buffer.alloc(16));
      }
    },
    majorGcs: () => fullGcs.filter((t) => t >= marks[0]! && t <= marks[1]!).length,
    ms: () => marks[1]! - marks[0]!,
  };
}
