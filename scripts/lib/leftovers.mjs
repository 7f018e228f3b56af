// Processes a test run leaves behind. Every process the tests start (servers, workers, the demo, a
// browser) inherits a marker in its environment; at the end of a test file, and once more at the
// end of the whole run, any process still carrying the marker is a leak: it is killed and named.
// The marker survives where a process tree does not: a detached redis-server whose parent was
// SIGKILLed is re-parented to init, but its /proc/<pid>/environ still holds the marker.
import { readdirSync, readFileSync } from 'node:fs';

/** The environment variable that marks a run's processes (its value: the run's or the worker's id). */
export const RUN_MARKER = 'NRS_TEST_RUN';
export const WORKER_MARKER = 'NRS_TEST_WORKER';

/** Whether this machine can tell (Linux' /proc); elsewhere every check finds nothing. */
export const canFindLeftovers = (() => {
  try {
    readFileSync(`/proc/${process.pid}/environ`);
    return true;
  } catch {
    return false;
  }
})();

/**
 * Processes other than this one (and `except`) whose environment holds `name=value`, with their
 * command lines. A process that exits while it is read is skipped.
 */
export function markedProcesses(name, value, except = []) {
  if (!canFindLeftovers) return [];
  const needle = Buffer.from(`\0${name}=${value}\0`);
  const skip = new Set([process.pid, ...except]);
  const found = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || skip.has(pid)) continue;
    try {
      const environ = Buffer.concat([Buffer.from('\0'), readFileSync(`/proc/${pid}/environ`)]);
      if (!environ.includes(needle)) continue;
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      // A zombie (exited, not yet reaped by its parent) is gone already.
      if (/^\S+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) continue;
      found.push({ pid, args });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/**
 * The marked processes still running after up to `graceMs` (a server told to stop may take a moment),
 * each then killed with SIGKILL. Resolves with what was killed.
 */
export async function reapMarked(name, value, { graceMs = 3000, except = [] } = {}) {
  const deadline = Date.now() + graceMs;
  let left = markedProcesses(name, value, except);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = markedProcesses(name, value, except);
  }
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  return left;
}
