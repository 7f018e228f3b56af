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
