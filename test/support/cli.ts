import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dlqMain, DLQ_BIN_SHORT_USAGE } from '../../libs/redis-streams/src/cli/dlq-main.js';
import { redisStreamsMain, REDIS_STREAMS_SHORT_USAGE } from '../../libs/redis-streams/src/cli/redis-streams-main.js';
import { runCommand } from '../../libs/redis-streams/src/cli/run-command.js';
import { requireBuilt, repoRoot } from './built.js';
import type { TestRedis } from './redis-server.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

type Bin = 'redis-streams' | 'redis-streams-dlq';

/** The test server's address as the CLI takes it, unless `args` name one. */
const targetOf = (redis: TestRedis, args: string[]) =>
  args.includes('--url') || args.includes('--cluster')
    ? []
    : redis.cluster
      ? ['--cluster', (redis.connection as string[]).join(',')]
      : ['--url', redis.url];

/**
 * Runs a `redis-streams` (or `redis-streams-dlq`) command against the test's server in this process,
 * through the binary's own runner (exit codes, error lines); resolves with its exit code and output,
 * whatever the code. A process per run cost 0.3 CPU-s each, 200 runs a suite. What only a process
 * shows (a pipe, a signal, the exit itself) goes through `runCliProcess`.
 */
export async function runCli(redis: TestRedis, args: string[], bin: Bin = 'redis-streams'): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io = {
    out: (text: string) => (stdout += `${text}\n`),
    err: (text: string) => (stderr += `${text}\n`),
    raw: (text: string) => (stdout += text),
    tty: false,
  };
  const [main, usage] = bin === 'redis-streams' ? [redisStreamsMain, REDIS_STREAMS_SHORT_USAGE] : [dlqMain, DLQ_BIN_SHORT_USAGE];
  const code = await runCommand(bin, main, usage, [...args, ...targetOf(redis, args)], io);
  return { code, stdout, stderr };
}

/**
 * The built binary in a process of its own: resolves with its exit code and output, whatever the code.
 * One still running after `timeoutMs` (default: the test's own timeout) is killed: its code is then null.
 */
export async function runCliProcess(
  redis: TestRedis,
  args: string[],
  bin: Bin = 'redis-streams',
  { timeoutMs = 0, env = {} as Record<string, string | undefined> } = {},
): Promise<CliRun> {
  const script = requireBuilt(`libs/redis-streams/dist/esm/cli/${bin === 'redis-streams' ? 'redis-streams' : 'dlq'}.js`);
  return promisify(execFile)(process.execPath, [script, ...args, ...targetOf(redis, args)], {
    cwd: repoRoot,
    timeout: timeoutMs,
    env: { ...process.env, ...env },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number | null; stdout: string; stderr: string }) => ({
      code: err.code as number,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}
