import { spawn, type ChildProcess } from 'node:child_process';
import { repoRoot } from './built.js';

/**
 * How long a worker process's start is waited for: mostly CPU (Node, Nest, a cluster's handshakes), and CI runs
 * several files at once on 2 cores (15 s was missed once for a cluster worker, 10 s for a one-node one).
 */
export const WORKER_START_MS = 60_000;

/** A test that starts a worker process: its start may take WORKER_START_MS, then the test's own steps. */
export const WORKER_TEST_MS = 120_000;

/** A Node process a test started: the process, its stdout and stderr as one text so far, and its exit code to come. */
export interface NodeProcess {
  proc: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

/**
 * `node <script> <args>` from the repo root, with `env` (default: the test's own environment), its
 * stdout and stderr gathered as one text. Killing it is the caller's (an afterEach or a `finally`).
 */
export function spawnNode(script: string, args: readonly string[] = [], env: NodeJS.ProcessEnv = process.env): NodeProcess {
  const proc = spawn(process.execPath, [script, ...args], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exit };
}
