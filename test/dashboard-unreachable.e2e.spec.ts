// The dashboard module when its Redis cannot be reached (issue 48, item 5): its own connection's trouble
// goes through the app's logger once per change of state, never ioredis' "Unhandled error event" per
// reconnect, never the password; and every call of its API, and every action, answers 503 with the
// documented body, from the first call on (the first used to be a 500 "Reached the max retries…").
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RedisStreamsDashboardModule } from 'nestjs-redis-streams';
import { repoRoot } from './support/built.js';
import { captureLogs } from './support/logs.js';
import { CLUSTER_MODE, freePort, startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
const user = 'dash';
const right = `right-${randomUUID()}`;
const wrong = `wrong-${randomUUID()}`;

// Killed and revived by a test: a server of this file's own.
beforeAll(async () => {
  redis = await startRedis({ standalone: true });
  await redis.client().call('ACL', 'SETUSER', user, 'reset', 'on', `>${right}`, '~*', '&*', '+@all');
});
afterAll(async () => redis?.stop());

/**
 * A Nest app with the dashboard module on `url`, in a process of its own: everything it printed (its
 * stdout and stderr, the app's logger among them) once its connection has tried `attempts` times.
 */
async function appOutput(url: string, attempts: number, throwingLogger = false): Promise<{ code: number | null; output: string }> {
  const source = `
    import 'reflect-metadata';
    import diagnostics_channel from 'node:diagnostics_channel';
    import { Module } from '@nestjs/common';
    import { NestFactory } from '@nestjs/core';
    import { RedisStreamsDashboardModule } from 'nestjs-redis-streams';
    // Each TCP connection attempt of the process: the dashboard's connection is its only client.
    let tries = 0;
    diagnostics_channel.subscribe('net.client.socket', () => tries++);
    class AppModule {}
    Module({ imports: [RedisStreamsDashboardModule.register({ basePath: '/ops', connection: process.env.DASHBOARD_URL })] })(AppModule);
    // Throws on the transport's lines only (Nest's own, at start, would stop the app before the test begins).
    const sinkDown = (m, context) => { if (context === 'RedisStreamsDashboardModule') throw new Error('log sink down'); };
    const app = await NestFactory.create(AppModule, ${throwingLogger ? '{ logger: { log: sinkDown, warn: sinkDown, error: sinkDown } }' : '{}'});
    await app.init();
    await new Promise((resolve) => {
      const poll = setInterval(() => tries >= ${attempts} && (clearInterval(poll), resolve()), 20);
    });
    console.log('attempts: ' + tries);
    await app.close();`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', source], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: '1', DASHBOARD_URL: url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  onTestFinished(() => void (proc.exitCode === null && proc.signalCode === null && proc.kill('SIGKILL')));
  let output = '';
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
  return { code, output };
}

/** Every GET of the API that reads Redis, and every action, for a stream `key` with group `g`. */
function calls(key: string): { path: string; body?: unknown }[] {
  const q = `key=${encodeURIComponent(key)}`;
  const id = '1-1';
  return [
    { path: 'api/overview' },
    { path: 'api/dead-letter-streams' },
    { path: `api/stream?${q}` },
    { path: `api/pending?${q}&group=g` },
    { path: `api/entries?${q}` },
    { path: `api/entry?${q}&id=${id}` },
    { path: `api/dead-letters?key=${encodeURIComponent(`${key}:dead`)}` },
    { path: 'api/dead-letters/redrive', body: { key: `${key}:dead`, ids: [id] } },
    { path: 'api/dead-letters/delete', body: { key: `${key}:dead`, ids: [id] } },
    { path: 'api/pause', body: { key, group: 'g' } },
    { path: 'api/resume', body: { key, group: 'g' } },
    { path: 'api/pending/release', body: { key, group: 'g', id } },
    { path: 'api/pending/dead-letter', body: { key, group: 'g', id } },
    { path: 'api/pending/retry-now', body: { key, group: 'g', id } },
  ];
}

/** A Nest app with the dashboard module (actions on) on `connection`, listening; its base URL. */
async function dashboardApp(
  connection: string | string[],
  prefix: string,
  logger: ReturnType<typeof captureLogs>['logger'],
): Promise<string> {
  @Module({
    imports: [
      RedisStreamsDashboardModule.register({
        basePath: '/ops',
        connection,
        match: `${prefix}*`,
        actions: { guard: () => true },
        logger: { log: () => {} },
      }),
    ],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger });
  onTestFinished(() => app.close());
  await app.listen(0, '127.0.0.1');
  return `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/`;
}

/** Each call at once: its path, status and body. */
async function callAll(base: string, key: string) {
  return Promise.all(
    calls(key).map(async ({ path, body }) => {
      const res = await fetch(`${base}${path}`, {
        ...(body === undefined
          ? {}
          : {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
              body: JSON.stringify(body),
            }),
      });
      return { path, status: res.status, body: (await res.json()) as Record<string, unknown> };
    }),
  );
}

/** What the docs promise for a call (and, outcome unknown, an action) while Redis cannot be reached. */
function unreachable(path: string, cause: RegExp) {
  const action = !path.includes('?') && !['api/overview', 'api/dead-letter-streams'].includes(path);
  return {
    path,
    status: 503,
    body: action
      ? {
          error: expect.stringMatching(
            new RegExp(
              `^Redis unreachable: ${cause.source}.*: the action may (have been carried out in part or not at all|still be carried out once it answers); look before trying again$`,
            ),
          ),
          outcome: 'unknown',
        }
      : { error: expect.stringMatching(new RegExp(`^Redis unreachable: ${cause.source}`)) },
  };
}

describe.skipIf(CLUSTER_MODE)('the dashboard module with its Redis unreachable', () => {
  it('a wrong password and a port where nothing listens: one line each through the app logger, no "Unhandled error event", no password', async () => {
    const port = await freePort();
    const cases = [
      { url: `redis://${user}:${wrong}@127.0.0.1:${redis.port}`, cause: 'WRONGPASS', where: `redis://${user}:***@127.0.0.1:${redis.port}` },
      {
        url: `redis://${user}:${right}@127.0.0.1:${port}`,
        cause: `ECONNREFUSED 127.0.0.1:${port}`,
        where: `redis://${user}:***@127.0.0.1:${port}`,
      },
    ];
    // Five attempts each: ioredis' backoff (doubling from 50 ms, plus up to 200 ms of jitter) makes them within about 1.5 s.
    const outputs = await Promise.all(cases.map(({ url }) => appOutput(url, 5)));
    for (const [i, { cause, where }] of cases.entries()) {
      const { code, output } = outputs[i]!;
      expect([cause, code], output).toEqual([cause, 0]);
      expect(output).toMatch(/^attempts: (\d+)$/m);
      expect(Number(/^attempts: (\d+)$/m.exec(output)![1])).toBeGreaterThanOrEqual(5);
      expect(output).not.toContain('Unhandled error event');
      for (const secret of [wrong, right]) expect(output).not.toContain(secret);
      // One line for the whole outage, in the app's logger, naming the server (password masked) and the cause.
      const told = output.split('\n').filter((line) => line.includes(cause));
      expect([cause, told], output).toEqual([
        cause,
        [
          expect.stringMatching(
            new RegExp(
              `WARN .*\\[RedisStreamsDashboardModule\\] cannot connect to ${escape(where)} \\(.*${cause}.*\\), retrying in \\d+ ms`,
            ),
          ),
        ],
      ]);
    }
  });

  it('an app logger that throws on those lines costs the lines (on stderr), not the process (review-y)', async () => {
    const port = await freePort();
    // Before: the line was logged from ioredis' error event, and the throw ended the process (exit 1).
    const { code, output } = await appOutput(`redis://127.0.0.1:${port}`, 5, true);
    expect(code, output).toBe(0);
    expect(output).toMatch(
      /\[nestjs-redis-streams\] the logger threw \(log sink down\); its line: cannot connect to redis:\/\/127\.0\.0\.1:\d+ .*ECONNREFUSED/,
    );
  });

  it('every call and action answers 503 "Redis unreachable", from the first on: nothing listening, a wrong password, no cluster seed answering, a Redis killed under it', async (ctx) => {
    if (!redis.owned) return ctx.skip(); // REDIS_URL: a server the test may not kill
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const [port, seed1, seed2] = [await freePort(), await freePort(), await freePort()];
    const logs = captureLogs();
    // Never connected: nothing listening, a wrong password, a cluster none of whose seeds answers (its
    // overview said 200 with no stream: no master known was taken for none to scan).
    const never: [string, RegExp][] = [
      // Refused; or reset, when another process of a busy machine took the free port meanwhile.
      [`redis://127.0.0.1:${port}`, new RegExp(`(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}|read ECONNRESET)`)],
      [`redis://${user}:${wrong}@127.0.0.1:${redis.port}`, /WRONGPASS /],
      [`redis://127.0.0.1:${seed1},redis://127.0.0.1:${seed2}`, /Failed to refresh slots cache/],
    ];
    const answers = await Promise.all(
      never.map(async ([url]) => callAll(await dashboardApp(url.includes(',') ? url.split(',') : url, prefix, logs.logger), key)),
    );
    for (const [i, [url, cause]] of never.entries())
      expect([url, answers[i]]).toEqual([url, calls(key).map(({ path }) => unreachable(path, cause))]);
    expect(JSON.stringify(answers)).not.toContain(wrong);
    const base = await dashboardApp(redis.url, prefix, logs.logger);
    await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
    // Connected and ready (no call made: the overview's key list would be kept 5 s, and its read shared for 0.5 s): its
    // name is set before its ready check, and a kill between them is a connection that never came up ("cannot
    // connect … read ECONNRESET": CI's nest11 lane), so the wait is for the ready check's INFO, run after the name.
    await waitFor(
      async () =>
        String(await redis.client().client('LIST'))
          .split('\n')
          .some((l) => l.includes('name=redis-streams:dashboard ') && /\bcmd=(?!client\|setname|auth|hello|select)\S+/.test(l)),
      { message: "the dashboard's connection, ready" },
    );
    await redis.kill('SIGKILL');
    let revived = false;
    onTestFinished(async () => void (revived || (await redis.revive())));
    // The cause is the connection's own error: refused once it tries again, or the loss itself if asked before.
    expect(await callAll(base, key)).toEqual(
      calls(key).map(({ path }) => unreachable(path, /(connect ECONNREFUSED 127\.0\.0\.1:\d+|the connection was lost)/)),
    );
    await redis.revive();
    revived = true;
    await waitFor(async () => (await fetch(`${base}api/overview`)).status === 200, {
      message: 'the overview once Redis is back',
      timeoutMs: 15_000,
    });
    const lines = logs.from('RedisStreamsDashboardModule');
    // Its story, a line per change of state: never connected (the port), then lost and restored (killed).
    expect(lines.join('\n')).not.toContain(wrong);
    expect(lines.filter((l) => l.includes(`127.0.0.1:${port}`))).toEqual([
      expect.stringMatching(
        new RegExp(`^warn cannot connect to redis://127\\.0\\.0\\.1:${port} \\(.*ECONNREFUSED.*\\), retrying in \\d+ ms$`),
      ),
    ]);
    const own = lines.filter((l) => l.includes(`redis://127.0.0.1:${redis.port}`));
    const at = `redis://127\\.0\\.0\\.1:${redis.port}`;
    // Lost and restored; or, when the kill landed between the ready check's INFO and the client's ready event (a
    // loaded machine: CI's nest11 lane), a connection that never came up, still down, then connected: each a line
    // per change of state, as the report promises.
    if (!own[0]?.startsWith('warn cannot connect'))
      expect(own, own.join('\n')).toEqual([
        expect.stringMatching(new RegExp(`^warn connection to ${at} lost \\(.*ECONNREFUSED.*\\), retrying in \\d+ ms$`)),
        expect.stringMatching(new RegExp(`^log connection to ${at} restored after \\d+(\\.\\d)? s$`)),
      ]);
    else {
      expect(own[0]).toMatch(new RegExp(`^warn cannot connect to ${at} \\(.*(ECONNRESET|ECONNREFUSED).*\\), retrying in \\d+ ms$`));
      expect(own.at(-1)).toMatch(new RegExp(`^log connected to ${at} after \\d+(\\.\\d)? s$`));
      expect(own.slice(1, -1), own.join('\n')).toEqual(
        own.length === 3 ? [expect.stringMatching(new RegExp(`^warn connection to ${at} still down \\(.*\\), retrying in \\d+ ms$`))] : [],
      );
    }
  });
  it('Redis busy in a script answers 503 "Redis unavailable", not 400 (review finding)', async () => {
    const prefix = uniquePrefix();
    const logs = captureLogs();
    const base = await dashboardApp(`redis://127.0.0.1:${redis.port}`, prefix, logs.logger);
    const key = `${prefix}orders`;
    await redis.client().xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
    const stream = `${base}api/stream?key=${encodeURIComponent(key)}`;
    expect((await fetch(stream)).status).toBe(200);
    const admin = redis.client();
    const [threshold] = ((await admin.config('GET', 'busy-reply-threshold')) as string[]).slice(1);
    await admin.config('SET', 'busy-reply-threshold', '100');
    // A script that runs 3 to 4 s by Redis' clock (it ends by itself), on a connection of its own.
    const running = redis
      .newClient()
      .eval("local s = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) < s + 4 do end return 1", 0);
    try {
      const probe = redis.newClient();
      await waitFor(
        () =>
          probe.ping().then(
            () => false,
            (err: Error) => /^BUSY /.test(err.message),
          ),
        { message: 'Redis busy' },
      );
      const res = await fetch(stream);
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: string }).error).toMatch(/^Redis unavailable: BUSY /);
    } finally {
      await running;
      await admin.config('SET', 'busy-reply-threshold', threshold ?? '5000');
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
