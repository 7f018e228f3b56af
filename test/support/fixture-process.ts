import type { ChildProcess } from 'node:child_process';
import { repoRoot } from './built.js';
import { spawnNode } from './node-process.js';
import { waitFor } from './wait-for.js';

/**
 * Runs `test/fixtures/<script>` with `args` in a process of its own (pushed to `children`, for the file's
 * afterEach to kill) and resolves once it printed `until` (default `ready`); fails with its output if it exits first.
 */
export async function startFixture(
  children: ChildProcess[],
  script: string,
  args: readonly string[],
  until = 'ready',
): Promise<{ child: ChildProcess; out: () => string }> {
  const { proc: child, output: out } = spawnNode(`${repoRoot}test/fixtures/${script}`, args);
  children.push(child);
  await waitFor(() => out().includes(`${until}\n`) || child.exitCode !== null, {
    message: `${script} to print ${until}`,
    // A Nest worker's start is a second or two of CPU; on CI's full machine (every lane at once) one took over 20 s.
    timeoutMs: 45_000,
  });
  if (child.exitCode !== null) throw new Error(`${script} exited: ${out()}`);
  return { child, out };
}

/**
 * Runs `test/fixtures/<script>` with `args` and waits (up to 15 s) for it to exit by itself: a timer or
 * connection left open would keep it alive. Killed if it has not by then (or the wait fails). Resolves
 * with its exit code and output.
 */
export async function runFixtureToExit(script: string, args: readonly string[]): Promise<{ code: number | null; out: string }> {
  const { proc: child, output, exit } = spawnNode(`${repoRoot}test/fixtures/${script}`, args);
  try {
    await waitFor(() => child.exitCode !== null, { message: `${script} to exit by itself`, timeoutMs: 15_000 });
  } finally {
    child.kill('SIGKILL');
  }
  return { code: await exit, out: output() };
}
