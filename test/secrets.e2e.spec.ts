import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { inspect, promisify } from 'node:util';
import { RedisStreamsServer } from 'nestjs-redis-streams';
import { repoRoot, requireBuilt } from './support/built.js';
import { captureLogs } from './support/logs.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { startApp, uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

// Issue 20, item 2: no error, log line, event, health figure or CLI output may carry a password.
// ioredis' errors carry the handshake's arguments (`HELLO 3 AUTH user <password>`).

let redis: TestRedis;
const user = 'app';
const right = `right-${randomUUID()}`;
const wrong = `wrong-${randomUUID()}`;
let wrongUrl: string;
let rightUrl: string;

beforeAll(async () => {
  redis = await startRedis({ standalone: true });
  await redis.client().call('ACL', 'SETUSER', user, 'reset', 'on', `>${right}`, '~*', '&*', '+@all');
  wrongUrl = `redis://${user}:${wrong}@127.0.0.1:${redis.port}`;
  rightUrl = `redis://${user}:${right}@127.0.0.1:${redis.port}`;
});
afterAll(async () => redis?.stop());

/** Everything an output holds, as Node would print it (util.inspect shows `cause`, own properties, nested errors). */
const printed = (...values: unknown[]): string =>
  values.map((v) => (typeof v === 'string' ? v : inspect(v, { depth: 20, showHidden: false }))).join('\n');

function expectSafe(output: string, secret: string, masked = `${user}:***@127.0.0.1:${redis.port}`): void {
  expect(output).not.toContain(secret);
  expect(output).not.toContain(encodeURIComponent(secret));
  expect(output).toContain('WRONGPASS');
  expect(output).toContain(masked);
}

/** Runs an ES module script with the built library; resolves with its exit code and all it printed. */
async function runScript(source: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const proc = spawn(process.execPath, ['--input-type=module', '-e', source], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  return { code, output };
}

/** Runs a built CLI; resolves with its exit code and output, whatever the code. */
async function cli(bin: 'dlq' | 'redis-streams', ...args: string[]): Promise<{ code: number; output: string }> {
  const script = requireBuilt(`libs/redis-streams/dist/esm/cli/${bin}.js`);
  return promisify(execFile)(process.execPath, [script, ...args], {
    cwd: repoRoot,
    env: { ...process.env, REDIS_URL: '', REDIS_CLUSTER_URLS: '' },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, output: err.stdout + err.stderr }),
  );
}

/**
 * The tests that run processes (the quick start worker, a producer script, the CLIs, the demo) print what the
 * in-process ones see, the server's refusal masked by the same code: they run on the default server only (npm test),
 * not again in the passes on Redis 8.6 and Valkey (REDIS_SERVER_BIN), where they were 20 of 25 CPU-s (2026-12-06).
 */
const processes = it.skipIf(process.env.REDIS_SERVER_BIN !== undefined);

describe('a wrong password never appears in any output', () => {
  processes(
    'the quick start worker: listen() rejects (printed by Node as an unhandled rejection) with the masked URL and WRONGPASS',
    async () => {
      const { code, output } = await runScript(
        `import 'reflect-metadata';
       import { Module } from '@nestjs/common';
       import { NestFactory } from '@nestjs/core';
       import { RedisStreamsServer } from 'nestjs-redis-streams';
       class M {}
       Module({})(M);
       const server = new RedisStreamsServer({ connection: process.env.REDIS_URL, group: 'g', consumer: 'c' });
       server.on('error', (err) => console.log('error event:', err));
       server.addHandler('orders', async () => {}, true);
       const app = await NestFactory.createMicroservice(M, { strategy: server });
       await app.listen();`,
        { REDIS_URL: wrongUrl },
      );
      expect(code).not.toBe(0);
      expectSafe(output, wrong);
    },
  );

  processes('a producer: emit and send reject, and the error event fires, with the masked URL and WRONGPASS', async () => {
    const { code, output } = await runScript(
      `import { lastValueFrom } from 'rxjs';
       import { RedisStreamsClient } from 'nestjs-redis-streams';
       const client = new RedisStreamsClient({ connection: process.env.REDIS_URL, commandTimeoutMs: 1000 });
       let events = 0;
       client.on('error', (err) => events++ || console.log('error event:', err));
       await lastValueFrom(client.emit('orders', { n: 1 })).catch((err) => console.log('emit rejected:', err));
       await lastValueFrom(client.send('quote', { n: 1 })).catch((err) => console.log('send rejected:', err));
       console.log('events', events);
       await client.close();
       await lastValueFrom(client.emit('orders', { n: 2 }));`,
      { REDIS_URL: wrongUrl },
    );
    expect(code).not.toBe(0);
    expect(output).toMatch(/emit rejected:[\s\S]*send rejected:[\s\S]*events [1-9]/);
    expectSafe(output, wrong);
  });

  it('over RESP2 too (ioredis then sends AUTH <user> <password>): listen() rejects without the password', async () => {
    // Not a literal: ioredis 5 (always RESP2) has no \`protocol\` option, and the suite also compiles against it.
    const node = { host: '127.0.0.1', port: redis.port, username: user, password: wrong, protocol: 2 as const };
    const server = new RedisStreamsServer({ connection: node, group: 'g', consumer: 'c' });
    server.addHandler('orders', async () => undefined, true);
    const failure = await new Promise<unknown>((resolve) => server.listen((err) => resolve(err)));
    await server.close();
    expect((failure as { reason?: string }).reason).toBe('WRONGPASS');
    expectSafe(printed(failure), wrong);
  });

  it('a running worker whose password was rotated: its logs, error events and health carry neither password', async () => {
    const logs = captureLogs();
    const events: unknown[] = [];
    const app = await startApp(
      { connection: rightUrl, group: 'g', keyPrefix: uniquePrefix(), blockMs: 50, commandTimeoutMs: 500 },
      { logger: logs.logger },
    );
    try {
      app.server.on('error', (err) => void events.push(err));
      const admin = redis.client();
      await admin.call('ACL', 'SETUSER', user, 'resetpass', `>${wrong}`);
      await admin.call('CLIENT', 'KILL', 'USER', user);
      await waitFor(
        async () => logs.text().includes('WRONGPASS') && events.length > 0 && (await app.server.health()).statsError !== undefined,
        {
          message: 'the worker to report WRONGPASS in its logs, events and health',
        },
      );
      const health = await app.server.health();
      expectSafe(printed(logs.text(), ...events, health), right);
      expect(health.statsError).toBeDefined();
    } finally {
      await redis.client().call('ACL', 'SETUSER', user, 'resetpass', `>${right}`);
      await app.close();
    }
  });

  processes('the CLIs fail with the masked URL and WRONGPASS', async () => {
    for (const run of [
      cli('dlq', 'list', 'orders:dead', '--url', wrongUrl),
      cli('redis-streams', 'inspect', 'orders', '--url', wrongUrl),
      cli('redis-streams', 'inspect', '--cluster', wrongUrl),
    ]) {
      const { code, output } = await run;
      expect(code).toBe(1);
      expectSafe(output, wrong);
    }
  });

  it('health() of a worker that cannot log in, and the worker it belongs to, carry no password', async () => {
    const server = new RedisStreamsServer({ connection: wrongUrl, group: 'g', consumer: 'c', startupTimeoutMs: 60_000 });
    server.addHandler('orders', async () => undefined, true);
    const listening = new Promise<unknown>((resolve) => server.listen((err) => resolve(err)));
    const health = await server.health();
    const failure = await listening;
    expectSafe(printed(failure), wrong);
    expect(printed(health)).not.toContain(wrong);
    await server.close();
  });

  // Two demo runs, four Node processes: 5 s alone, past 30 s on a loaded CI machine.
  processes('the demo, with a wrong password and with the right one', { timeout: 60_000 }, async () => {
    requireBuilt('dist/apps/orders-worker/main.js');
    const run = (url: string, orders: string) =>
      new Promise<{ code: number | null; output: string }>((resolve) => {
        const proc = spawn(process.execPath, ['scripts/demo.mjs', '--quiet', '--once', '--orders', orders], {
          cwd: repoRoot,
          env: { ...process.env, NO_COLOR: '1', REDIS_URL: url, REDIS_CLUSTER_URLS: '', STREAMS_KEY_PREFIX: uniquePrefix() },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        proc.stdout.on('data', (d) => (output += d));
        proc.stderr.on('data', (d) => (output += d));
        proc.once('exit', (code) => resolve({ code, output }));
      });
    const failed = await run(wrongUrl, '1');
    expect(failed.code).not.toBe(0);
    expectSafe(failed.output, wrong);
    const ok = await run(rightUrl, '3');
    expect(ok.output).toContain('all 3 orders acked');
    expect(ok.output).not.toContain(right);
    expect(ok.output).toContain(`${user}:***@127.0.0.1:${redis.port}`);
  });
});
