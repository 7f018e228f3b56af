import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireBuilt, repoRoot } from './built.js';
import type { TestRedis } from './redis-server.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `redis-streams` CLI (or `redis-streams-dlq` with `bin: 'redis-streams-dlq'`) against
 * the test's server; resolves with its exit code and output, whatever the code.
 */
export async function runCli(redis: TestRedis, args: string[], bin = 'redis-streams'): Promise<CliRun> {
  const script = requireBuilt(`libs/redis-streams/dist/esm/cli/${bin === 'redis-streams' ? 'redis-streams' : 'dlq'}.js`);
  const target = args.includes('--url')
    ? []
    : redis.cluster
      ? ['--cluster', (redis.connection as string[]).join(',')]
      : ['--url', redis.url];
  return promisify(execFile)(process.execPath, [script, ...args, ...target], { cwd: repoRoot }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}
