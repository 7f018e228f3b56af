import { spawn } from 'node:child_process';
import { repoRoot, requireBuilt } from './support/built.js';
import { waitFor } from './support/wait-for.js';
import { freePort } from './support/redis-server.js';

/** Runs `npm run demo`'s script; with no REDIS_URL it starts its own throwaway redis-server. */
function runDemo(args: string[], env: Record<string, string> = {}) {
  requireBuilt('dist/apps/orders-worker/main.js');
  const proc = spawn(process.execPath, ['scripts/demo.mjs', '--quiet', ...args], {
    cwd: repoRoot,
    // Its own key prefix, in case REDIS_URL points all test files at one server.
    env: { ...process.env, NO_COLOR: '1', STREAMS_KEY_PREFIX: `demo-${process.pid}-${Date.now()}:`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, output: () => out, exit };
}

describe('npm run demo', () => {
  it('on a port nobody listens on, says so in one line with the cause (not ioredis’ maxRetriesPerRequest advice)', async () => {
    const port = await freePort();
    const demo = runDemo(['--once'], { REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(await demo.exit).not.toBe(0);
    expect(demo.output().trim()).toBe(`demo: cannot reach Redis at redis://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('feeds orders to the worker, reports them all acked, and stops clean', async () => {
    const demo = runDemo(['--once', '--orders', '120']);
    expect(await demo.exit).toBe(0);
    expect(demo.output()).toContain('all 120 orders acked');
    expect(demo.output()).toMatch(/worker exited with 0; 0 entries pending/);
  });

  it('stops everything cleanly on Ctrl-C (SIGINT)', async () => {
    const demo = runDemo(['--orders', '30']);
    try {
      await waitFor(() => demo.output().includes('all 30 orders acked'), { message: 'the demo to finish feeding', timeoutMs: 20_000 });
      demo.proc.kill('SIGINT');
      expect(await demo.exit).toBe(0);
      expect(demo.output()).toMatch(/stopping \(Ctrl-C\)[\s\S]*worker exited with 0/);
    } finally {
      if (demo.proc.exitCode === null) demo.proc.kill('SIGKILL');
    }
  });

  it('on Ctrl-C with orders still to handle, reports them pending and never claims them acked', async () => {
    const demo = runDemo(['--orders', '3'], { DEMO_WORK_MS: '3000' });
    try {
      await waitFor(() => /progress 0\/3 acked \(written 3, lag \d+, pending [1-9]/.test(demo.output()), {
        message: 'an order in hand',
        timeoutMs: 20_000,
      });
      demo.proc.kill('SIGINT');
      expect(await demo.exit).toBe(0);
      // The orders not handled are left in Redis: pending (delivered, handed back) or not yet delivered, whichever the
      // worker's last read had reached when it stopped.
      const left = /worker exited with 0; (\d+) entries pending and (\d+) not yet delivered/.exec(demo.output());
      expect(left, demo.output()).not.toBeNull();
      expect(Number(left![1]) + Number(left![2])).toBeGreaterThan(0);
      expect(demo.output()).not.toMatch(/orders acked/);
    } finally {
      if (demo.proc.exitCode === null) demo.proc.kill('SIGKILL');
    }
  });
});
