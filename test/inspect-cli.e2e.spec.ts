import { execFile } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { requireBuilt, repoRoot } from './support/built.js';
import { runCli, runCliProcess } from './support/cli.js';
import { aclUser } from './support/acl.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup, groupOnNewStream, preloadOrders } from './support/backlog.js';
import type { StreamReport } from '../libs/redis-streams/src/ops/stream-reports.js';

const redis = useRedis();

/** Runs `redis-streams …` against the test's Redis; resolves with its exit code and output, whatever the code. */
const cli = (...args: string[]) => runCli(redis, args);
/** The same through the built binary, a process of its own: it must exit once done, its code the command's. */
const bin = (...args: string[]) => runCliProcess(redis, args);

/**
 * Usage errors, and servers other than the test's (none listening, one that never answers): the cluster project would
 * only run the same processes again (a dozen CLI starts), so they run on one node.
 */
const oneNode = it.skipIf(CLUSTER_MODE);

/** A stream with group `g`: 5 entries, 3 delivered to `busy` (1 of them acked), 1 dead letter, an idle consumer `gone`. */
async function scene() {
  const prefix = uniquePrefix();
  const key = `${prefix}orders`;
  const r = redis.client();
  const ids = await preloadOrders(r, prefix, 5);
  await r.xreadgroup('GROUP', 'g', 'busy', 'COUNT', 3, 'STREAMS', key, '>');
  await r.xack(key, 'g', ids[0]!);
  await r.call('XGROUP', 'CREATECONSUMER', key, 'g', 'gone');
  await r.xadd(deadLetterKey(key), '*', 'stream', key, 'sourceId', ids[4]!, 'fields', '["n","4"]');
  return { prefix, key, ids };
}

describe('redis-streams inspect', () => {
  it('reports per stream, group and consumer what an operator asks first, as JSON and as text', async () => {
    const { key, ids } = await scene();
    const json = await cli('inspect', key, '--json');
    expect(json.code).toBe(0);
    const [report] = JSON.parse(json.stdout) as any[];
    expect(report).toMatchObject({
      stream: key,
      length: 5,
      lastGeneratedId: ids[4],
      entriesAdded: 5,
      deadLetters: [{ stream: deadLetterKey(key), length: 1 }],
      groups: [{ name: 'g', pending: 2, lastDeliveredId: ids[2], lag: 2, entriesRead: 3 }],
    });
    const consumers = Object.fromEntries((report.groups[0].consumers as any[]).map((c) => [c.name, c]));
    expect(consumers.busy).toMatchObject({ pending: 2 });
    expect(consumers.busy.oldestPendingAgeMs).toBeGreaterThanOrEqual(0);
    expect(consumers.gone).toMatchObject({ pending: 0, oldestPendingAgeMs: null });
    expect(typeof consumers.gone.idleMs).toBe('number');

    const text = await cli('inspect', key);
    expect(text.stdout).toContain(`${key}  length 5  last id ${ids[4]}`);
    expect(text.stdout).toContain(`group g  lag 2  pending 2  last delivered ${ids[2]}  consumers 2`);
    expect(text.stdout).toMatch(/busy {2}pending 2 {2}idle .* {2}oldest pending /);
    expect(text.stdout).toContain(`dead letters: ${deadLetterKey(key)} 1`);
    // The server and what it offers of the newer stream commands (redis/server-features.ts), under the header.
    expect(text.stdout.split('\n')[1]).toMatch(/^server: (Redis|Valkey) \d+\.\d+\.\d+.*: /);
    expect(report.idempotency === null || typeof report.idempotency.iidsAdded === 'number').toBe(true);
  });

  it('finds the streams with a group under --match, and --watch refreshes with rates', async () => {
    const { prefix, key } = await scene();
    // Not listed: no group (a dead-letter stream, a reply stream).
    const listed = await cli('inspect', '--match', `${prefix}*`, '--json');
    expect((JSON.parse(listed.stdout) as { stream: string }[]).map((s) => s.stream)).toEqual([key]);
    const watched = await cli('inspect', key, '--watch', '--interval', '100', '--times', '2', '--json');
    expect(watched.code).toBe(0);
    const frames = watched.stdout
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as {
            at: number;
            streams: unknown[];
            rates?: { produced: Record<string, number>; consumed: Record<string, number> };
          },
      );
    expect(frames).toHaveLength(2);
    expect(frames[0]).toMatchObject({ server: expect.stringMatching(/^(Redis|Valkey) /) });
    expect(frames[0]!.rates).toBeUndefined();
    expect(frames[1]!.rates).toEqual({ produced: { [key]: 0 }, consumed: { [key]: { g: 0 } } });
  });
});

describe('redis-streams consumers prune and dlq', () => {
  it('prunes idle consumers that own nothing, and keeps the dead-letter commands (the binary: each exits once done)', async () => {
    const { key } = await scene();
    const pruned = await bin('consumers', 'prune', key, '--group', 'g', '--idle-ms', '1', '--json');
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toEqual(['gone']);
    const find = await bin('dlq', 'find', key, '--json');
    expect(JSON.parse(find.stdout)).toEqual([deadLetterKey(key)]);
    const list = await bin('dlq', 'list', deadLetterKey(key), '--json');
    expect(JSON.parse(list.stdout.trim())).toMatchObject({ stream: key, fields: ['n', '4'] });
  });

  oneNode(
    'the binary answers --help on stdout, refuses a bad command with exit 2, and names an unreachable server (password masked)',
    async () => {
      const help = await bin('--help');
      expect(help).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout).toMatch(/^usage:\n {2}redis-streams inspect/);
      const bad = await bin('purge');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/unknown command "purge"/);
      const prune = await bin('consumers', 'prune', 'orders', '--idle-ms', '1');
      expect(prune.code).toBe(2);
      expect(prune.stderr).toMatch(/needs --group/);
      const down = await bin('inspect', 'orders', '--url', 'redis://ops:s3cret@127.0.0.1:1');
      expect(down.code).toBe(1);
      expect(down.stderr).toMatch(/cannot connect to redis:\/\/ops:\*\*\*@127\.0\.0\.1:1: connect ECONNREFUSED/);
      expect(down.stderr).not.toContain('s3cret');
    },
  );
});

describe('redis-streams, what the review broke', () => {
  it('writes all of a large --json output to a pipe (no exit before stdout drained)', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    for (let i = 0; i < 400; i++) await createGroup(r, `${prefix}s${String(i).padStart(3, '0')}-${'x'.repeat(100)}`);
    // A reader slower than the CLI (`sleep 1` before it reads: the fault under test, not a wait):
    // past the pipe's 64 KiB buffer Node queues the rest, which an early process.exit() drops.
    const script = requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
    const target = redis.cluster ? `--cluster ${(redis.connection as string[]).join(',')}` : `--url ${redis.url}`;
    const { stdout } = await promisify(execFile)(
      'sh',
      ['-c', `"${process.execPath}" "${script}" inspect --match '${prefix}*' --json ${target} | (sleep 1; cat)`],
      { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(stdout.length).toBeGreaterThan(65_536);
    expect(JSON.parse(stdout)).toHaveLength(400);
    // 400 streams made and inspected (on a cluster too): over 30 s once on CI's full CPU. A hang still fails.
  }, 90_000);

  it('gives the oldest pending age from its idle time when the id is not a time (explicit ids)', async () => {
    const r = redis.client();
    const { key } = await groupOnNewStream(r);
    await r.xadd(key, '1-1', 'n', '1');
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1, 'STREAMS', key, '>');
    const [report] = JSON.parse((await cli('inspect', key, '--json')).stdout) as any[];
    expect(report.groups[0].consumers[0].oldestPendingAgeMs).toBeLessThan(60_000);
  });

  it('--watch finds streams that appear and survives one that goes, and nests rates by stream and group', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    await createGroup(r, `${prefix}a b`, 'c');
    await createGroup(r, `${prefix}a`, 'b c');
    // One read each, so that the groups' entries-read is known (a rate needs it).
    for (const [key, group] of [
      [`${prefix}a b`, 'c'],
      [`${prefix}a`, 'b c'],
    ] as const) {
      await r.xadd(key, '*', 'n', '1');
      await r.xreadgroup('GROUP', group, 'x', 'STREAMS', key, '>');
    }
    const script = requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
    const target = redis.cluster ? ['--cluster', (redis.connection as string[]).join(',')] : ['--url', redis.url];
    const child = execFile(
      process.execPath,
      [script, 'inspect', '--match', `${prefix}*`, '--watch', '--interval', '300', '--times', '4', '--json', ...target],
      { cwd: repoRoot },
    );
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await waitFor(() => out.split('\n').filter(Boolean).length >= 1, { message: 'the first frame' });
    await r.del(`${prefix}a`);
    await createGroup(r, `${prefix}new`);
    expect(await exited).toBe(0);
    const frames = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { streams: { stream: string }[]; rates?: { consumed: Record<string, Record<string, number>> } });
    expect(frames).toHaveLength(4);
    expect(
      frames
        .at(-1)!
        .streams.map((s) => s.stream)
        .sort(),
    ).toEqual([`${prefix}a b`, `${prefix}new`]);
    expect(frames[1]!.rates!.consumed[`${prefix}a b`]).toEqual({ c: 0 });
  });

  oneNode(
    "refuses bad numbers as usage errors (exit 2), an --interval past a timer's range, and a database that does not exist",
    async () => {
      for (const args of [
        ['--interval', '0', '--watch'],
        ['--interval', '1.5', '--watch'],
        ['--times', '0'],
        ['--interval', String(2 ** 31), '--watch'],
      ]) {
        const run = await cli('inspect', 'x', ...args);
        expect(run.code, args.join(' ')).toBe(2);
      }
      const db = await cli('inspect', 'x', '--url', `${redis.url}/99`);
      expect(db.code).toBe(1);
      expect(db.stderr).toMatch(/DB index is out of range/);
    },
  );

  it('names the key when a stream is missing or of another type', async () => {
    const prefix = uniquePrefix();
    await redis.client().set(`${prefix}str`, 'x');
    const wrong = await cli('inspect', `${prefix}str`);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`"${prefix}str"`);
    const missing = await cli('inspect', `${prefix}nothing`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`no stream "${prefix}nothing"`);
  });

  it('never hides a stream whose dead-letter key holds another type: the stream is shown and the key flagged', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r, 'payments');
    for (let i = 0; i < 2; i++) await r.xadd(key, '*', 'n', String(i));
    await r.xreadgroup('GROUP', 'g', 'stuck', 'COUNT', 2, 'STREAMS', key, '>');
    await r.hset(deadLetterKey(key), 'oops', '1');
    const flagged = `"${deadLetterKey(key)}" is not a stream: nothing can be dead-lettered there`;
    for (const args of [['--match', `${prefix}*`], [key]]) {
      const text = await cli('inspect', ...args);
      expect(text.stderr).toBe('');
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('1 stream\n');
      expect(text.stdout).toContain(`group g  lag 0  pending 2`);
      expect(text.stdout).toContain(`attention: ${flagged}`);
      const [report] = JSON.parse((await cli('inspect', ...args, '--json')).stdout) as StreamReport[];
      expect(report).toMatchObject({ stream: key, deadLetters: [], deadLetterKeysNotStreams: [deadLetterKey(key)] });
      expect(report!.groups[0]!.consumers[0]).toMatchObject({ name: 'stuck', pending: 2 });
    }
  });

  oneNode('the dashboard exits 2 on a usage error instead of keeping its connection open', async () => {
    // Without $DASHBOARD_PASSWORD, and a port out of range. A process: a connection left open holds it.
    const noPassword = await runCliProcess(redis, ['dashboard', '--actions'], 'redis-streams', {
      timeoutMs: 15_000,
      env: { DASHBOARD_PASSWORD: undefined },
    });
    expect(noPassword.code).toBe(2);
    expect(noPassword.stderr).toMatch(/--actions needs \$DASHBOARD_PASSWORD/);
    const badPort = await runCliProcess(redis, ['dashboard', '--port', '99999'], 'redis-streams', { timeoutMs: 15_000 });
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toMatch(/--port must be a whole number from 1 to 65535/);
  });

  oneNode('a server that accepts the connection but never answers fails within --timeout-ms, naming it (password masked)', async () => {
    const silent = createServer(() => {}); // accepts, never replies
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `redis://ops:s3cret@127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const started = performance.now();
      const run = await cli('inspect', 'orders', '--url', url, '--timeout-ms', '300');
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/cannot connect to redis:\/\/ops:\*\*\*@127\.0\.0\.1:\d+: no answer within 300 ms/);
      expect(run.stderr).not.toContain('s3cret');
      expect(performance.now() - started).toBeLessThan(10_000);
      const dlq = await runCli(redis, ['list', 'orders:dead', '--url', url, '--timeout-ms', '300'], 'redis-streams-dlq');
      expect(dlq.code).toBe(1);
      expect(dlq.stderr).toMatch(/no answer within 300 ms/);
      const bad = await cli('inspect', 'orders', '--timeout-ms', '0');
      expect(bad.code).toBe(2);
    } finally {
      silent.close();
    }
  });

  it.skipIf(CLUSTER_MODE)(
    'inspect without stream names fails (exit 1) when a stream cannot be read, instead of leaving it out',
    async () => {
      const { prefix } = await scene();
      // A name that holds ioredis' timeout text: the failure must not read as a timeout.
      const key = `${prefix}Command timed out`;
      await createGroup(redis.client(), key);
      // Every right but XINFO: the SCAN finds the stream, its groups cannot be read.
      const user = await aclUser(redis.client(), redis.port, `insp-${prefix.slice(2, 10)}`, prefix, ['on', '>pw', '~*', '+@all', '-xinfo']);
      const run = await cli('inspect', '--match', `${prefix}*`, '--url', `redis://${user.username}:pw@127.0.0.1:${redis.port}`);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`"${key}"`);
      expect(run.stderr).toMatch(/NOPERM/);
      expect(run.stderr).not.toMatch(/no answer/);
      expect(run.stdout).toBe('');
    },
  );

  it.skipIf(CLUSTER_MODE)('a stream that fails past its first read is named in the failure', async () => {
    const { prefix, key } = await scene();
    // XINFO STREAM and GROUPS allowed, XINFO CONSUMERS not: the failure comes from a later read of the stream.
    const user = await aclUser(redis.client(), redis.port, `insc-${prefix.slice(2, 10)}`, prefix, [
      'on',
      '>pw',
      '~*',
      '+@all',
      '-xinfo|consumers',
    ]);
    const run = await cli('inspect', key, '--url', `redis://${user.username}:pw@127.0.0.1:${redis.port}`);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`"${key}": NOPERM`);
  });

  oneNode('the dashboard exits on a bad --base-path instead of serving a broken page', async () => {
    const run = await runCliProcess(redis, ['dashboard', '--base-path', 'nope', '--port', '0'], 'redis-streams', { timeoutMs: 15_000 });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/basePath/);
    // Said before it connects: the flag first, whatever the server.
    const unreachable = await runCliProcess(redis, ['dashboard', '--base-path', 'nope', '--url', 'redis://127.0.0.1:1'], 'redis-streams', {
      timeoutMs: 15_000,
    });
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(/basePath/);
    expect(unreachable.stderr).not.toMatch(/cannot connect/);
  });

  it('a command that ends with its work unsettled exits 1 and says so, never 0 in silence', async () => {
    // Its promise never settles and nothing holds the process: Node ends it with the command unfinished.
    const run = await promisify(execFile)(process.execPath, [`${repoRoot}test/fixtures/cli-never-settles.mjs`], { timeout: 15_000 }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^redis-streams: stopped before the command finished/);
  });

  it('prunes without touching a key of the user named like a lock, and never says "none" when it did not look', async () => {
    const { key } = await scene();
    await redis.client().set(`${key}:prune`, 'mine', 'PX', 60_000);
    const pruned = await cli('consumers', 'prune', key, '--group', 'g', '--idle-ms', '1', '--json');
    expect(JSON.parse(pruned.stdout)).toEqual(['gone']);
    expect(await redis.client().get(`${key}:prune`)).toBe('mine');
  });
});
