#!/usr/bin/env node
// npm test's runner: `vitest run` with its arguments, every process of the run marked (NRS_TEST_RUN in
// its environment), then the check that none is left: whatever the tests' outcome, a process still
// running with the mark (a server, a worker, a cluster node, a browser) is killed and named, and the
// run fails. test/support/leftovers.ts does the same for each test file as it ends.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { canFindLeftovers, markedProcesses, reapMarked, RUN_MARKER } from './lib/leftovers.mjs';

// A run that never ends (a test file whose loop holds its worker's event loop: Vitest's own timeouts
// are timers that never fire then) fails here, and the reaping below names what was still running.
// 0 turns it off; anything but a whole number of ms a timer can hold is refused, not taken as 0.
const limitMs = Number(process.env.TEST_RUN_LIMIT_MS || 20 * 60_000);
if (!Number.isSafeInteger(limitMs) || limitMs < 0 || limitMs > 2 ** 31 - 1) {
  console.error(`TEST_RUN_LIMIT_MS must be a whole number of ms from 0 (no limit) to ${2 ** 31 - 1}, got ${process.env.TEST_RUN_LIMIT_MS}`);
  process.exit(2);
}
const run = randomUUID();
/** Marks the type check's processes (npm and all it starts), to stop them together. */
const TYPECHECK_MARKER = 'NRS_TEST_TYPECHECK';
const args = process.argv.slice(2);
// --typecheck (npm test's): `npm run typecheck` beside the tests instead of before them. The tests keep about 1.4 of
// the 2 cores busy, waiting on Redis' timers: the type check (about 25 CPU-s) runs at a lower priority in the rest,
// so it costs the tests little and the run no longer waits about 20 s for it. Its output is printed at the end.
const typecheck = args.includes('--typecheck') ? startTypecheck() : undefined;
const vitest = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const child = spawn(process.execPath, [vitest, 'run', ...args.filter((a) => a !== '--typecheck')], {
  stdio: 'inherit',
  env: { ...process.env, [RUN_MARKER]: run },
});
// Ctrl-C reaches Vitest through the terminal's process group; a SIGTERM sent to this process alone is passed on.
process.on('SIGTERM', () => {
  child.kill('SIGTERM');
  typecheck?.stop('SIGTERM');
});
// Ctrl-C reaches the type check through the process group too: noted, so that it is not taken for type errors.
process.on('SIGINT', () => typecheck?.stop('SIGINT'));
const watchdog = setTimeout(() => {
  if (limitMs === 0) return;
  console.error(
    `\nthe test run did not end within ${Math.round(limitMs / 1000)} s (TEST_RUN_LIMIT_MS): stopped; a worker's event loop is likely held`,
  );
  child.kill('SIGKILL');
  typecheck?.stop('SIGKILL');
}, limitMs);
const [code, signal] = await new Promise((resolve) => child.once('exit', (...args) => resolve(args)));
// A failed type check prints last, so the tail of the log shows it; a passed one says so in a line.
const typed = typecheck ? await typecheck.done : true;
clearTimeout(watchdog);
const left = await reapMarked(RUN_MARKER, run, { graceMs: 5000 });
if (left.length > 0) {
  console.error(`\nleftovers: ${left.length} process(es) still running after the tests (killed now):`);
  for (const p of left) console.error(`  ${p.pid} ${p.args.slice(0, 200)}`);
} else if (!canFindLeftovers) console.error('leftovers: not checked (no /proc on this machine)');
process.exitCode = left.length > 0 || !typed ? 1 : (code ?? (signal ? 1 : 0));

function startTypecheck() {
  const started = Date.now();
  // In the runner's process group (a kill of the group stops it too); stopped by its mark (npm, sh, tsc).
  const proc = spawn('npm', ['run', '-s', 'typecheck'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, [RUN_MARKER]: run, [TYPECHECK_MARKER]: run },
  });
  try {
    setPriority(proc.pid, 10);
  } catch {
    // Not allowed here: it runs at the tests' priority.
  }
  const out = [];
  proc.stdout.on('data', (b) => out.push(b));
  proc.stderr.on('data', (b) => out.push(b));
  const done = new Promise((resolve) => {
    proc.once('error', (err) => {
      out.push(Buffer.from(`${err.message}\n`));
      resolve(false);
    });
    proc.once('close', (status, signal) => {
      const secs = Math.round((Date.now() - started) / 1000);
      if (status === 0) {
        console.log(`typecheck: passed (npm run typecheck, beside the tests, ${secs} s)`);
        return resolve(true);
      }
      if (stopped) {
        console.error(`failed: npm run typecheck stopped with the run (${stopped}, ${secs} s)`);
        return resolve(false);
      }
      process.stderr.write(Buffer.concat(out));
      console.error(`failed: npm run typecheck (${signal ?? `exit ${status}`}, ${secs} s): the type errors above`);
      resolve(false);
    });
  });
  let stopped;
  const stop = (sig) => {
    stopped ??= sig;
    // npm, sh and tsc by the type check's own mark (as leftovers are found): not npm alone.
    for (const { pid } of markedProcesses(TYPECHECK_MARKER, run)) {
      try {
        process.kill(pid, sig);
      } catch {
        // Already gone.
      }
    }
  };
  return { done, stop };
}
