import { spawn, type ChildProcess } from 'node:child_process';
import { repoRoot } from './built.js';
import { waitFor } from './wait-for.js';

/**
 * Runs `test/fixtures/<script>` with `args` in a process of its own (pushed to `children`, for the file's
 * afterEach to kill) and resolves once it printed `ready`; fails with its output if it exits first.
 */
export async function startFixture(
  children: ChildProcess[],
  script: string,
  args: readonly string[],
): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn(process.execPath, [`${repoRoot}test/fixtures/${script}`, ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await waitFor(() => out.includes('ready\n') || child.exitCode !== null, { message: `${script} to start`, timeoutMs: 20_000 });
  if (child.exitCode !== null) throw new Error(`${script} exited: ${out}`);
  return { child, out: () => out };
}
