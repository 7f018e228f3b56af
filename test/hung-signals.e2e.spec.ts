import { spawn } from 'node:child_process';
import { requireBuilt, repoRoot } from './support/built.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

// A child process given one URL: the one-node run covers it.
describe.skipIf(CLUSTER_MODE)('a hung handler and signals (Nest shutdown hooks, default options)', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'a second signal (%s) while close() waits ends the process, leaving the entry pending; a restart gets it again',
    async (second) => {
      requireBuilt('libs/redis-streams/dist/esm/index.js');
      const prefix = uniquePrefix();
      const script = `${repoRoot}test/fixtures/hung-handler-signals.mjs`;
      const child = spawn(process.execPath, [script, redis.url, prefix, 'hung'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
      const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
        child.once('exit', (code, signal) => resolve(signal ?? code)),
      );
      onTestFinished(() => void child.kill('SIGKILL'));
      await waitFor(() => out.includes('listening'), { message: 'the child to listen', timeoutMs: 15_000 });
      const id = await redis.client().xadd(`${prefix}orders`, '*', 'n', '1');
      await waitFor(() => out.includes(`entered ${id}`), { message: 'the hung handler to start' });
      child.kill('SIGTERM');
      await waitFor(() => /stopping: waiting for 1 entry in hand/.test(out), { message: 'close() to wait on the handler' });
      child.kill(second);
      // Nest re-raises the first signal once close() resolved.
      expect(await exited, out).toBe('SIGTERM');
      expect(out).toMatch(new RegExp(`${second} while closing: abandoning 1 entry in hand, left pending: "${prefix}orders" ${id}`));
      const pending = (await redis.client().xpending(`${prefix}orders`, 'g', '-', '+', 10)) as [string, string][];
      expect(pending.map(([p, owner]) => [p, owner])).toEqual([[id, 'hung']]);
      // A restart under the same name drains it at once.
      const app = await start({ connection: redis.connection, group: 'g', consumer: 'hung', keyPrefix: prefix, blockMs: 100 });
      await waitFor(() => app.settled.length === 1, { message: 'the entry delivered again' });
      expect(app.recorder.idsOf()).toEqual([id]);
      expect(app.recorder.calls[0]!.deliveryCount).toBe(2);
    },
  );
});

describe.skipIf(CLUSTER_MODE)('a worker started without a SIGTERM handler', () => {
  /** The fixture worker (no test runner's NODE_ENV), with or without Nest's shutdown hooks; resolves with what it printed up to `listening`. */
  async function startedOutput(hooks: 'hooks' | 'no-hooks' | 'late-hooks' | 'no-hooks-throwing-logger'): Promise<string> {
    requireBuilt('libs/redis-streams/dist/esm/index.js');
    const script = `${repoRoot}test/fixtures/hung-handler-signals.mjs`;
    const env = { ...process.env, NODE_ENV: undefined, NO_COLOR: '1' };
    const child = spawn(process.execPath, [script, redis.url, uniquePrefix(), 'c', hooks], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onTestFinished(() => void child.kill('SIGKILL'));
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    await waitFor(() => out.includes('listening'), { message: 'the child to listen', timeoutMs: 15_000 });
    // Still running once the check's turn has passed (it runs before `listening` is printed).
    expect(child.exitCode).toBeNull();
    return out;
  }

  it('warns once at start, naming the fix (Nest shutdown hooks), where a stop would kill it mid-entry; not when they are on', async () => {
    const warning =
      /nothing handles SIGTERM: a stop .* would kill this process mid-entry \(exit 143\) .*call app\.enableShutdownHooks\(.*or, without a Nest app, call the server's close\(\) on SIGTERM/;
    const without = await startedOutput('no-hooks');
    expect(without).toMatch(warning);
    expect(without.match(/nothing handles SIGTERM/g)).toHaveLength(1);
    // Said before `listening` when at all: the check runs on the turn after listen() (the fixture waits for it).
    expect(await startedOutput('hooks')).not.toMatch(/SIGTERM/);
    // A hybrid app enables them after startAllMicroservices(), before its HTTP listen(): not warned either.
    expect(await startedOutput('late-hooks')).not.toMatch(/SIGTERM/);
  });

  it('an app logger that throws on that warning costs the line (on stderr), not the process (review-x)', async () => {
    // Before: the throw left the check's setImmediate as an uncaught exception, and the worker died as it started.
    const out = await startedOutput('no-hooks-throwing-logger');
    expect(out).toMatch(/\[nestjs-redis-streams\] the logger threw \(log sink down\); its line: nothing handles SIGTERM/);
  });
});
