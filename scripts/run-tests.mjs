#!/usr/bin/env node
// npm test's runner: `vitest run` with its arguments, every process of the run marked (NRS_TEST_RUN in
// its environment), then the check that none is left: whatever the tests' outcome, a process still
// running with the mark (a server, a worker, a cluster node, a browser) is killed and named, and the
// run fails. test/support/leftovers.ts does the same for each test file as it ends.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { canFindLeftovers, reapMarked, RUN_MARKER } from './lib/leftovers.mjs';

// A run that never ends (a test file whose loop holds its worker's event loop: Vitest's own timeouts
// are timers that never fire then) fails here, and the reaping below names what was still running.
// 0 turns it off; anything but a whole number of ms a timer can hold is refused, not taken as 0.
const limitMs = Number(process.env.TEST_RUN_LIMIT_MS || 20 * 60_000);
if (!Number.isSafeInteger(limitMs) || limitMs < 0 || limitMs > 2 ** 31 - 1) {
  console.error(`TEST_RUN_LIMIT_MS must be a whole number of ms from 0 (no limit) to ${2 ** 31 - 1}, got ${process.env.TEST_RUN_LIMIT_MS}`);
  process.exit(2);
}
const run = randomUUID();
const vitest = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const child = spawn(process.execPath, [vitest, 'run', ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, [RUN_MARKER]: run },
});
// Ctrl-C reaches Vitest through the terminal's process group; a SIGTERM sent to this process alone is passed on.
process.on('SIGTERM', () => child.kill('SIGTERM'));
process.on('SIGINT', () => undefined);
const watchdog = setTimeout(() => {
  if (limitMs === 0) return;
  console.error(
    `\nthe test run did not end within ${Math.round(limitMs / 1000)} s (TEST_RUN_LIMIT_MS): stopped; a worker's event loop is likely held`,
  );
  child.kill('SIGKILL');
}, limitMs);
const [code, signal] = await new Promise((resolve) => child.once('exit', (...args) => resolve(args)));
clearTimeout(watchdog);
const left = await reapMarked(RUN_MARKER, run, { graceMs: 5000 });
if (left.length > 0) {
  console.error(`\nleftovers: ${left.length} process(es) still running after the tests (killed now):`);
  for (const p of left) console.error(`  ${p.pid} ${p.args.slice(0, 200)}`);
} else if (!canFindLeftovers) console.error('leftovers: not checked (no /proc on this machine)');
process.exitCode = left.length > 0 ? 1 : (code ?? (signal ? 1 : 0));
