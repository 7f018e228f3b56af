import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StreamConsumerOptions } from 'nestjs-redis-streams/core';
import { startFixture } from './support/fixture-process.js';
import { captureLogs } from './support/logs.js';
import { CORE_HOST, TestWorker, uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';
import { PauseCommands } from '../libs/redis-streams/src/redis/intake/pause-commands.js';
import { pauseKeyOf } from '../libs/redis-streams/src/key-names.js';
import { PauseWatch } from '../libs/redis-streams/src/consumer/intake/pause-watch.js';
import { RedisStreamsClient, RedisStreamsRecord, serveDashboard } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { runCli } from './support/cli.js';
import { aclUser, PAUSE_ACL } from './support/acl.js';
import { deadLetterKey } from './support/redis-server.js';

const redis = useRedis();

const { consumers, children, dirs } = useLeftoversAfterEach();

/** A worker on the test's host (TEST_HOST: a Nest app or a StreamConsumer), closed after the test. */
function consumer(prefix: string, options: StreamConsumerOptions = {}): TestWorker {
  const c = new TestWorker({
    connection: redis.connection,
    group: 'g',
    blockMs: 200,
    minIdleMs: 2000,
    flowCheckMs: 100,
    logger: false,
    keyPrefix: prefix,
    ...options,
  });
  consumers.push(c);
  return c;
}

async function produce(stream: string, from: number, count: number): Promise<void> {
  for (let n = from; n < from + count; n++) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n }));
}

/** The group's figures on `stream`: entries not yet delivered, and pending. */
async function groupOf(stream: string): Promise<{ lag: number; pending: number }> {
  const rows = (await redis.client().xinfo('GROUPS', stream)) as unknown[][];
  const row = rows.map((r) => Object.fromEntries(r.flatMap((v, i) => (i % 2 === 0 ? [[v, r[i + 1]]] : [])))).find((g) => g.name === 'g')!;
  return { lag: Number(row.lag), pending: Number(row.pending) };
}

/** `n` looks of every worker (flowCheckMs 100) and parks (blockMs 200) have passed, by this process' clock: a bound for "nothing happened". */
const beats = (n: number) => {
  const start = Date.now();
  return waitFor(() => Date.now() - start >= n * 200, { message: `${n} beats`, intervalMs: 50 });
};

/**
 * Starts recorded after their worker reported the pause of their stream, beyond the one whose turn had begun before
 * (a per-key limit's grant in flight; concurrency 1): `<consumer> <stream> <how many>` for each over the bound.
 */
function lateStarts(
  events: { kind: 'paused' | 'start'; consumer: string; stream: string }[],
  seen: (consumer: string, stream: string) => number,
): string[] {
  const late = new Map<string, number>();
  events.forEach((e, i) => {
    if (e.kind === 'start' && i > seen(e.consumer, e.stream))
      late.set(`${e.consumer} ${e.stream}`, (late.get(`${e.consumer} ${e.stream}`) ?? 0) + 1);
  });
  return [...late].filter(([, n]) => n > 1).map(([k, n]) => `${k} ${n}`);
}

/** The streams a worker's pause line names: its stream, or a partitioned pattern's partitions (`"<prefix>jobs" … (all 2 partitions)`). */
function pausedIn(line: string, prefix: string): string[] {
  const m = /^"(.+)" paused for group "g"(?: \((?:all (\d+) partitions|partitions? ([\d, ]+) of \d+)\))?:/.exec(line);
  if (!m) return [];
  if (m[2] === undefined && m[3] === undefined) return [m[1]!];
  const pattern = m[1]!.slice(prefix.length);
  const parts = m[2] !== undefined ? [...Array(Number(m[2])).keys()] : m[3]!.split(', ').map(Number);
  return parts.map((i) => `${prefix}{${pattern}:${i}}`);
}

describe('pause and resume a pattern for the whole group', () => {
  it('finishes what is in hand, reads nothing new while paused (every worker), stays ready, and resumes within a beat', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const handled: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const logs = captureLogs();
    const handler = async (p: { n: number }) => {
      if (p.n === 0) await held;
      handled.push(p.n);
    };
    const a = consumer(prefix, { consumer: 'a', logger: logs.logger }).handle('orders', handler);
    const b = consumer(prefix, { consumer: 'b' }).handle('orders', handler);
    // Another pattern of the same reader goes on.
    const other: number[] = [];
    a.handle('other', (p: { n: number }) => void other.push(p.n));
    await a.start();
    await b.start();
    await produce(stream, 0, 1);
    await waitFor(async () => (await groupOf(stream)).pending === 1, { message: 'entry 0 in a handler' });
    expect(await a.pause('orders')).toBe(true);
    expect(await a.pause('orders')).toBe(false);
    await waitFor(async () => (await b.health()).streams.find((s) => s.stream === stream)?.paused === true, {
      message: 'b to see the pause',
    });
    await produce(stream, 1, 20);
    await produce(`${prefix}other`, 0, 5);
    // The entry in hand finishes and is acked.
    release();
    await waitFor(async () => (await groupOf(stream)).pending === 0, { message: 'entry 0 settled' });
    await waitFor(() => other.length === 5, { message: 'the other pattern handled' });
    await beats(5);
    expect(handled).toEqual([0]);
    expect(await groupOf(stream)).toEqual({ lag: 20, pending: 0 });
    for (const c of [a, b]) {
      const health = await c.health();
      expect(health.state).toBe('running');
      expect(health.streams.find((s) => s.stream === stream)!.paused).toBe(true);
    }
    expect((await a.health()).streams.find((s) => s.stream === `${prefix}other`)!.paused).toBeUndefined();
    expect(logs.lines.some((l) => l.includes(`"${stream}" paused for group "g"`))).toBe(true);
    // Resumed from elsewhere (an operator): every worker within a look.
    expect(await new PauseCommands(redis.client()).resume(stream, 'g')).toBe(true);
    await waitFor(() => handled.length === 21, { message: 'the 20 entries handled after the resume' });
    // Handled is not acked yet: the acks follow their handlers (under load the last batch's came after this look).
    await waitFor(async () => (await groupOf(stream)).pending === 0, { message: 'the 20 entries acked' });
    expect(await groupOf(stream)).toEqual({ lag: 0, pending: 0 });
  });

  it('a worker that starts while paused stays paused, its own pending entries too, and drains them at the resume', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}reminders`;
    const dir = mkdtempSync(join(tmpdir(), 'pause-'));
    dirs.push(dir);
    const log = join(dir, 'handled.log');
    const conn = JSON.stringify(redis.connection);
    const lines = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) : []);
    // A worker killed -9 mid-handler: its entries stay in its pending list.
    const first = await startFixture(children, 'flow-worker.mjs', [conn, prefix, 'w1', log, '{"minIdleMs":600000}']);
    // In one read (a batch runs to its end before the next read).
    const tx = redis.client().multi();
    for (let n = 0; n < 4; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n, ms: 60_000 }));
    await tx.exec();
    await waitFor(async () => (await groupOf(stream)).pending === 4, { message: '4 entries in w1 handlers' });
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));
    await new PauseCommands(redis.client()).pause(stream, 'g', 'test');
    for (let n = 4; n < 8; n++) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n }));
    // Restarted under its name while paused: no self-drain, no read.
    const restarted = await startFixture(children, 'flow-worker.mjs', [conn, prefix, 'w1', log, '{"minIdleMs":600000}']);
    await beats(5);
    expect(lines()).toEqual([]);
    expect(await groupOf(stream)).toEqual({ lag: 4, pending: 4 });
    await new PauseCommands(redis.client()).resume(stream, 'g');
    // Its own 4, taken up again by the self-drain the resume owed (minIdleMs 10 min: no reclaim could), and the 4 new ones.
    await waitFor(() => lines().length === 8, { message: 'the 8 entries handled' });
    expect(
      lines()
        .map((l) => Number(l.split(' ')[3]))
        .sort(),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    await waitFor(async () => (await groupOf(stream)).pending === 0, { message: 'every entry acked' });
    restarted.child.kill('SIGKILL');
  });

  it('pauses a partitioned pattern by its name (each partition its flag), and says what it cannot do', async () => {
    const prefix = uniquePrefix();
    const handled: number[] = [];
    const partitions = [0, 1, 2].map((p) => `${prefix}{orders:${p}}`);
    const c = consumer(prefix).handle('orders', (p: { n: number }) => void handled.push(p.n), { partitions: 3 });
    await expect(c.pause('orders')).rejects.toThrow(/pause: the consumer is not running/);
    await c.start();
    await c.pause('orders');
    for (const key of partitions) expect(await redis.client().exists(pauseKeyOf(key, 'g'))).toBe(1);
    expect(await redis.client().exists(pauseKeyOf(`${prefix}orders`, 'g'))).toBe(0);
    const state = await new PauseCommands(redis.client()).state(partitions[0]!, 'g');
    expect(state!.by).toMatch(/^consumer /);
    expect(state!.at).toBeGreaterThan(0);
    for (let p = 0; p < 3; p++) await redis.client().xadd(`${prefix}{orders:${p}}`, '*', 'data', JSON.stringify({ n: p }));
    await beats(3);
    expect(handled).toEqual([]);
    expect((await c.health()).streams.every((s) => s.paused)).toBe(true);
    expect(await c.resume('orders')).toBe(true);
    expect(await c.resume('orders')).toBe(false);
    await waitFor(() => handled.length === 3, { message: 'the 3 partitions handled' });
    expect(await new PauseCommands(redis.client()).state(partitions[0]!, 'g')).toBeNull();
    // The CLI by the pattern's name: each partition, named.
    const cli = await runCli(redis, ['pause', `${prefix}orders`, '--group', 'g']);
    expect(cli.stdout.trim().split('\n')).toEqual(
      partitions.map((key) => expect.stringMatching(new RegExp(`^paused "${key.replace(/[{}]/g, '\\$&')}" for group "g"`))),
    );
    await waitFor(async () => (await c.health()).streams.every((s) => s.paused), { message: 'the worker to see the CLI pause' });
    // One partition resumed by its key: it alone reads again.
    expect((await runCli(redis, ['resume', partitions[1]!, '--group', 'g'])).stdout).toMatch(/^resumed /);
    await waitFor(async () => (await c.health()).streams.filter((s) => s.paused).length === 2, { message: 'one partition resumed' });
    expect(JSON.parse((await runCli(redis, ['resume', `${prefix}orders`, '--group', 'g', '--json'])).stdout)).toEqual({
      name: `${prefix}orders`,
      group: 'g',
      streams: partitions,
      resumed: [partitions[0], partitions[2]],
    });
  });

  it('a pause of a partitioned pattern is said once per pattern, naming its partitions; a partition resumed alone is named (issue 51)', async () => {
    const prefix = uniquePrefix();
    const name = `${prefix}invoices`;
    const logs = captureLogs();
    // Ordered and rate-limited: a reader per partition, each of which used to say the pause of its own stream.
    const c = consumer(prefix, { logger: logs.logger }).handle('invoices', () => undefined, { partitions: 4, ordered: true });
    await c.start();
    const said = (word: string) => logs.lines.filter((l) => l.includes(`${word} for group "g"`));
    await c.pause('invoices');
    await waitFor(async () => (await c.health()).streams.every((s) => s.paused), { message: 'every partition paused' });
    await waitFor(() => said('paused').length > 0, { message: 'the pause said' });
    await beats(5);
    expect(said('paused')).toEqual([
      `log "${name}" paused for group "g" (all 4 partitions): what is in hand finishes, nothing new starts until it resumes`,
    ]);
    // One partition resumed by its key: that partition, named.
    await runCli(redis, ['resume', `${prefix}{invoices:2}`, '--group', 'g']);
    await waitFor(() => said('resumed').length > 0, { message: 'the resume said' });
    await c.resume('invoices');
    await waitFor(() => said('resumed').length > 1, { message: 'the second resume said' });
    await beats(5);
    expect(said('resumed')).toEqual([
      `log "${name}" resumed for group "g" (partition 2 of 4)`,
      `log "${name}" resumed for group "g" (partitions 0, 1, 3 of 4)`,
    ]);
  });

  it('a pattern with priority levels (and partitions) is said once: its levels are one pattern; one level paused alone is named by its key (review finding)', async () => {
    const prefix = uniquePrefix();
    const logs = captureLogs();
    const c = consumer(prefix, { logger: logs.logger })
      .handle('plain', () => undefined, { priorities: { levels: 3 } })
      .handle('parts', () => undefined, { partitions: 2, priorities: { levels: 3 } });
    await c.start();
    const said = (word: string) => logs.lines.filter((l) => l.includes(`${word} for group "g"`)).sort();
    const allPaused = async (n: number) =>
      waitFor(async () => (await c.health()).streams.filter((s) => s.paused).length === n, { message: `${n} streams paused` });
    await c.pause('plain');
    await c.pause('parts');
    await allPaused(9);
    await waitFor(() => said('paused').length >= 2, { message: 'the pauses said' });
    await beats(5);
    const tail = ': what is in hand finishes, nothing new starts until it resumes';
    expect(said('paused')).toEqual([
      `log "${prefix}parts" paused for group "g" (all 2 partitions)${tail}`,
      `log "${prefix}plain" paused for group "g"${tail}`,
    ]);
    // One level of one partition resumed by its key: that stream, by its key, not "partition 0".
    const level = `${prefix}{parts:0}:prio:1`;
    await runCli(redis, ['resume', level, '--group', 'g', '--force']);
    await allPaused(8);
    await waitFor(() => said('resumed').length > 0, { message: 'the resume said' });
    await beats(5);
    expect(said('resumed')).toEqual([`log "${prefix}parts" resumed for group "g" (stream "${level}")`]);
  });

  it('pausing one stream pauses it alone: jobs:{tenant:1} paused, jobs:{tenant:2} and jobs:tenant run; the CLI and inspect name only it (review finding)', async () => {
    const prefix = uniquePrefix();
    const patterns = ['jobs:{tenant:1}', 'jobs:{tenant:2}', 'jobs:tenant'];
    const [one, two, plain] = patterns.map((p) => `${prefix}${p}`) as [string, string, string];
    const handled = new Map<string, number[]>(patterns.map((p) => [p, []]));
    const c = consumer(prefix);
    for (const p of patterns) c.handle(p, (m: { n: number }) => void handled.get(p)!.push(m.n));
    await c.start();
    const paused = await runCli(redis, ['pause', one, '--group', 'g']);
    expect(paused.stderr).toBe('');
    // It names what it paused, and only that.
    expect(paused.stdout).toBe(
      `paused "${one}" for group "g": its workers finish what they hold and read nothing new within flowCheckMs\n`,
    );
    const pausedOf = async () => Object.fromEntries((await c.health()).streams.map((s) => [s.stream, s.paused === true]));
    await waitFor(async () => (await pausedOf())[one], { message: 'the worker to see the pause' });
    expect(await pausedOf()).toEqual({ [one]: true, [two]: false, [plain]: false });
    const json = JSON.parse((await runCli(redis, ['pause', one, '--group', 'g', '--json'])).stdout) as { streams: string[] };
    expect(json.streams).toEqual([one]);
    for (const key of [one, two, plain]) await produce(key, 0, 3);
    await waitFor(() => handled.get('jobs:{tenant:2}')!.length === 3 && handled.get('jobs:tenant')!.length === 3, {
      message: 'the streams not paused handled',
    });
    await beats(3);
    expect(handled.get('jobs:{tenant:1}')).toEqual([]);
    const inspect = async (key: string) => (await runCli(redis, ['inspect', key, '--group', 'g'])).stdout;
    expect(await inspect(one)).toMatch(/\n {4}paused since \S+ by cli \S+: nothing new is read/);
    for (const key of [two, plain]) expect(await inspect(key)).not.toMatch(/paused/);
    expect((await runCli(redis, ['resume', one, '--group', 'g'])).stdout).toMatch(/^resumed ".*jobs:\{tenant:1\}" for group "g"/);
    await waitFor(() => handled.get('jobs:{tenant:1}')!.length === 3, { message: 'handled after the resume' });
  });

  it('from the CLI and the dashboard (an action behind its password), shown by inspect and the stream page', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const handled: number[] = [];
    const c = consumer(prefix).handle('orders', (p: { n: number }) => void handled.push(p.n));
    await c.start();
    expect((await runCli(redis, ['pause', `${prefix}ordres`, '--group', 'g'])).stderr).toMatch(
      /no stream with a consumer group is named ".*ordres"/,
    );
    expect((await runCli(redis, ['pause', stream])).stderr).toMatch(/pause needs --group G/);
    // A group the stream does not have: it would pause nothing now, and a group of that name created later.
    expect((await runCli(redis, ['pause', stream, '--group', 'gg'])).stderr).toMatch(/".*orders" has no group "gg" \(its groups: "g"\)/);
    expect(await redis.client().exists(pauseKeyOf(stream, 'gg'))).toBe(0);
    const paused = await runCli(redis, ['pause', stream, '--group', 'g']);
    expect(paused.stdout).toMatch(/^paused ".*orders" for group "g": its workers finish what they hold/);
    expect((await runCli(redis, ['pause', stream, '--group', 'g'])).stdout).toMatch(
      /was already paused for group "g" since \S+ by cli \S+@/,
    );
    await waitFor(async () => (await c.health()).streams[0]!.paused === true, { message: 'the worker to see the pause' });
    expect((await runCli(redis, ['inspect', stream, '--group', 'g'])).stdout).toMatch(
      /\n {4}paused since \S+ by cli \S+: nothing new is read/,
    );
    await produce(stream, 0, 3);
    await beats(3);
    expect(handled).toEqual([]);
    expect((await runCli(redis, ['resume', stream, '--group', 'g'])).stdout).toMatch(/^resumed ".*orders" for group "g"/);
    expect((await runCli(redis, ['resume', stream, '--group', 'g'])).stdout).toMatch(/was not paused/);
    await waitFor(() => handled.length === 3, { message: 'handled after the CLI resume' });

    const logs = captureLogs();
    const { server, url } = await serveDashboard(redis.client(), {
      port: 0,
      match: `${prefix}*`,
      actionsPassword: 'pw',
      logger: logs.logger,
    });
    try {
      const post = (path: string, body: object, password = 'pw') =>
        fetch(`${url}${path}`, {
          method: 'POST',
          headers: {
            authorization: `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`,
            'content-type': 'application/json',
            'x-requested-by': 'redis-streams-dashboard',
          },
          body: JSON.stringify(body),
        });
      expect((await post('api/pause', { key: stream, group: 'g' }, 'wrong')).status).toBe(401);
      expect((await post('api/pause', { key: `${prefix}nope`, group: 'g' })).status).toBe(400);
      expect((await post('api/pause', { key: stream })).status).toBe(400);
      expect((await post('api/pause', { key: stream, group: 'nogroup\u001b[2J' })).status).toBe(400);
      expect(await redis.client().keys(`${stream}:paused:*`)).toEqual([]);
      expect(await redis.client().exists(pauseKeyOf(stream, 'g'))).toBe(0);
      const res = await post('api/pause', { key: stream, group: 'g' });
      expect(await res.json()).toEqual({ changed: true });
      await waitFor(async () => (await c.health()).streams[0]!.paused === true, { message: 'the worker to see the dashboard pause' });
      const page = (await (
        await fetch(`${url}api/stream?key=${encodeURIComponent(stream)}`, {
          headers: { authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}` },
        })
      ).json()) as {
        groups: { paused: { by: string } | null }[];
      };
      expect(page.groups[0]!.paused!.by).toBe('dashboard ops');
      expect(logs.lines.some((l) => /dashboard: "ops" paused ".*orders" for group "g"/.test(l))).toBe(true);
      expect(await (await post('api/resume', { key: stream, group: 'g' })).json()).toEqual({ changed: true });
      await waitFor(async () => (await c.health()).streams[0]!.paused === undefined, { message: 'the worker to see the resume' });
    } finally {
      server.close();
    }
  });

  it('the CLI pauses under the documented operator ACL; a partitioned name needs +scan, and says so (review finding)', async () => {
    const prefix = uniquePrefix();
    const c = consumer(prefix)
      .handle('orders', () => undefined)
      .handle('parts', () => undefined, { partitions: 2 });
    await c.start();
    const name = `ops-${prefix.slice(2, 10)}`;
    const user = await aclUser(redis.client(), redis.port, name, prefix, PAUSE_ACL);
    const url = `redis://${user.username}:${user.password}@127.0.0.1:${redis.port}`;
    const pause = (key: string) => runCli(redis, ['pause', key, '--group', 'g', '--url', url]);
    const stream = `${prefix}orders`;
    expect(await pause(stream)).toMatchObject({ code: 0, stderr: '' });
    expect(await redis.client().exists(pauseKeyOf(stream, 'g'))).toBe(1);
    expect((await runCli(redis, ['resume', stream, '--group', 'g', '--url', url])).stdout).toMatch(/^resumed /);
    // By a partitioned pattern's name: its partitions are found by SCAN.
    const refused = await pause(`${prefix}parts`);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/scan/i);
    await redis.client().call('ACL', 'SETUSER', name, '+scan');
    expect((await pause(`${prefix}parts`)).stdout.trim().split('\n')).toHaveLength(2);
    await redis.client().call('ACL', 'DELUSER', name);
  });

  it("the CLI says what it could not look for, and --force by a partitioned pattern's name pauses its partitions, not a flag nobody reads (review finding)", async () => {
    const prefix = uniquePrefix();
    const c = consumer(prefix).handle('parts', () => undefined, { partitions: 2 });
    await c.start();
    const partitions = [0, 1].map((p) => `${prefix}{parts:${p}}`);
    const name = `ops-${prefix.slice(2, 10)}`;
    const user = await aclUser(redis.client(), redis.port, name, prefix, PAUSE_ACL);
    const url = `redis://${user.username}:${user.password}@127.0.0.1:${redis.port}`;
    // A name no stream has, under the documented ACL (no +scan): a usage error that says what to grant, not a NOPERM.
    const nosuch = await runCli(redis, ['pause', `${prefix}nosuch`, '--group', 'g', '--url', url]);
    expect(nosuch.code).toBe(2);
    expect(nosuch.stderr).toMatch(/no stream with a consumer group is named ".*nosuch".*\+scan/s);
    expect(nosuch.stderr).not.toMatch(/NOPERM/);
    const resumed = await runCli(redis, ['resume', `${prefix}nosuch`, '--group', 'g', '--url', url]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(/".*nosuch" was not paused/);
    expect(resumed.stderr).toMatch(/\+scan/);
    // --force by the pattern's name, where the CLI may look: each partition, as without --force.
    const forced = await runCli(redis, ['pause', `${prefix}parts`, '--group', 'g', '--force']);
    expect(forced.code).toBe(0);
    expect(forced.stdout.trim().split('\n')).toHaveLength(2);
    for (const key of partitions) expect(await redis.client().exists(pauseKeyOf(key, 'g'))).toBe(1);
    expect(await redis.client().exists(pauseKeyOf(`${prefix}parts`, 'g'))).toBe(0);
    await waitFor(async () => (await c.health()).streams.every((s) => s.paused), { message: 'the partitions paused' });
    await runCli(redis, ['resume', `${prefix}parts`, '--group', 'g']);
    // Where it may not look (no +scan): the flag as named, and a word that it pauses no partition.
    const blind = await runCli(redis, ['pause', `${prefix}parts`, '--group', 'g', '--force', '--url', url]);
    expect(blind.code).toBe(0);
    expect(blind.stdout).toMatch(/^paused ".*parts" for group "g"/);
    expect(blind.stderr).toMatch(/pauses no partition .*\{parts:0\}/);
    await redis.client().call('ACL', 'DELUSER', name);
  });

  it('an ordered pattern with per-key limits starts nothing once each worker has seen the pause; what its lanes hold runs after the resume, once (review finding)', async () => {
    const prefix = uniquePrefix();
    // One record outside the handlers, in order: each worker's report of the pause (its log line), and each start.
    const events: { kind: 'paused' | 'start'; consumer: string; stream: string; n?: number }[] = [];
    const loggerOf = (consumer: string) => ({
      log: (line: string) => {
        for (const stream of pausedIn(line, prefix)) events.push({ kind: 'paused', consumer, stream });
      },
      warn: () => undefined,
      error: () => undefined,
    });
    const workers = ['a', 'b'].map((name) =>
      consumer(prefix, { consumer: name, logger: loggerOf(name), maxDeliveries: 3 }).handle(
        'jobs',
        (p: { n: number }, ctx: { getStream(): string; getConsumer(): string }) =>
          void events.push({ kind: 'start', consumer: ctx.getConsumer(), stream: ctx.getStream(), n: p.n }),
        { ordered: true, partitions: 2, rateLimit: { max: 1, perMs: 300, perKey: true } },
      ),
    );
    for (const w of workers) await w.start();
    const client = new RedisStreamsClient({ connection: redis.connection, keyPrefix: prefix, partitions: { jobs: 2 } });
    consumers.push({ close: async () => void (await client.close()) });
    // 6 keys × 20 entries, each key at most one per 300 ms (6 s for the backlog, so that the pause, seen within a
    // flowCheckMs, comes well before its end even on a busy machine): the workers read far more than they may start.
    for (let n = 0; n < 120; n++)
      await lastValueFrom(client.emit('jobs', new RedisStreamsRecord({ n }, {}, { partitionKey: `k${n % 6}` })));
    const starts = () => events.filter((e) => e.kind === 'start');
    await waitFor(() => starts().length >= 20, { message: '20 entries started' });
    const partitions = [0, 1].map((i) => `${prefix}{jobs:${i}}`);
    expect(await workers[0]!.pause('jobs')).toBe(true);
    const seen = (consumer: string, stream: string) =>
      events.findIndex((e) => e.kind === 'paused' && e.consumer === consumer && e.stream === stream);
    await waitFor(() => ['a', 'b'].every((c) => partitions.every((s) => seen(c, s) >= 0)), { message: 'each worker to see the pause' });
    // Long enough for the key limits to have let some 20 more start.
    await beats(10);
    // The bound: nothing starts once a worker said it is paused, but an entry whose turn began before (concurrency 1: one per stream and worker).
    expect(lateStarts(events, seen)).toEqual([]);
    const before = starts().length;
    expect(before).toBeLessThan(120);
    await workers[0]!.resume('jobs');
    await waitFor(() => new Set(starts().map((e) => e.n)).size === 120, {
      message: 'all 120 handled after the resume',
      timeoutMs: 30_000,
      progress: () => new Set(starts().map((e) => e.n)).size,
    });
    // Held in the lanes while paused and given back uncounted: none ran twice or came back as a failure.
    expect(starts()).toHaveLength(120);
    // Started is not acked yet: wait for the acks of the last ones.
    for (const stream of partitions)
      await waitFor(async () => (await groupOf(stream)).pending === 0, { message: `${stream}'s entries acked` });
  });

  it('an ordered pattern: what its lanes held through a pause starts with the delivery count Redis holds, so maxDeliveries counts each run once (review finding)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    const runs = new Map<number, number[]>();
    // A start whose count differs from Redis' (a kill then would make its rerun look like a first delivery).
    const unlike: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    type Ctx = { getId(): string; getDeliveryCount(): number };
    const c = consumer(prefix, { maxDeliveries: 2, retry: { backoff: { type: 'fixed', delayMs: 300 } } }).handle(
      'jobs',
      async (p: { n: number }, ctx: Ctx) => {
        const count = ctx.getDeliveryCount();
        (runs.get(p.n) ?? runs.set(p.n, []).get(p.n)!).push(count);
        const [row] = (await redis.client().xpending(stream, 'g', ctx.getId(), ctx.getId(), 1)) as [string, string, number, number][];
        if (Number(row?.[3]) !== count) unlike.push(`entry ${p.n}: the handler sees ${count}, Redis holds ${row?.[3]}`);
        if (p.n === 0) await gate;
        throw new Error('always fails');
      },
      { ordered: true },
    );
    await c.start();
    // One key, four entries in one read: entry 0 runs, 1–3 wait in its lane.
    const tx = redis.client().multi();
    for (let n = 0; n < 4; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', 'one');
    const ids = ((await tx.exec()) ?? []).map(([, id]) => String(id));
    await waitFor(() => runs.has(0), { message: 'entry 0 in its handler' });
    expect(await c.pause('jobs')).toBe(true);
    // What the lane holds waits with its delivery count put back (Redis says 0 for each).
    const counts = async () =>
      ((await redis.client().xpending(stream, 'g', '-', '+', 10)) as [string, string, number, number][])
        .filter(([id]) => ids.slice(1).includes(id))
        .map((row) => Number(row[3]));
    await waitFor(async () => (await counts()).join() === '0,0,0', { message: 'the held entries put back' });
    // Entry 0 fails (delivery 1); its retry falls due while paused.
    release();
    await beats(3);
    expect(await c.resume('jobs')).toBe(true);
    await waitFor(async () => (await redis.client().xlen(deadLetterKey(stream))) === 4, {
      message: 'the four dead-lettered',
      timeoutMs: 20_000,
    });
    // Each ran twice, at deliveries 1 and 2 (the code before this ran 1–3 three times: 1, 1, 2).
    expect(Object.fromEntries(runs)).toEqual({ 0: [1, 2], 1: [1, 2], 2: [1, 2], 3: [1, 2] });
    expect(unlike).toEqual([]);
  });

  it('unordered: the rest of a batch in hand, the read-ahead and what a per-key limit holds start nothing once the worker has seen the pause (review finding)', async () => {
    const prefix = uniquePrefix();
    const events: { kind: 'paused' | 'start'; consumer: string; stream: string; n?: number }[] = [];
    const loggerOf = (consumer: string) => ({
      log: (line: string) => {
        for (const stream of pausedIn(line, prefix)) events.push({ kind: 'paused', consumer, stream });
      },
      warn: () => undefined,
      error: () => undefined,
    });
    type Ctx = { getStream(): string; getConsumer(): string; getDeliveryCount(): number };
    const counts: number[] = [];
    const start = (p: { n: number }, ctx: Ctx) =>
      void events.push({ kind: 'start', consumer: ctx.getConsumer(), stream: ctx.getStream(), n: p.n });
    const workers = ['a', 'b'].map((name) =>
      consumer(prefix, { consumer: name, logger: loggerOf(name), batchSize: 10, maxDeliveries: 3 })
        // A batch of 10 read at once (and the next read ahead), handled one at a time.
        .handle('slow', async (p: { n: number }, ctx: Ctx) => {
          start(p, ctx);
          counts.push(ctx.getDeliveryCount());
          await new Promise((resolve) => setTimeout(resolve, 30));
        })
        // Per key, in any order: what the limit refuses waits here for its turn.
        .handle('keyed', start, { rateLimit: { max: 2, perMs: 200, perKey: (p: { n: number }) => `k${p.n % 6}` } }),
    );
    for (const w of workers) await w.start();
    const streams = ['slow', 'keyed'].map((p) => `${prefix}${p}`);
    const tx = redis.client().multi();
    for (let n = 0; n < 120; n++) for (const stream of streams) tx.xadd(stream, '*', 'data', JSON.stringify({ n }));
    await tx.exec();
    const startsOf = (stream: string) => events.filter((e) => e.kind === 'start' && e.stream === stream);
    await waitFor(() => streams.every((s) => startsOf(s).length >= 10), { message: '10 entries of each started' });
    for (const p of ['slow', 'keyed']) await workers[0]!.pause(p);
    const seen = (consumer: string, stream: string) =>
      events.findIndex((e) => e.kind === 'paused' && e.consumer === consumer && e.stream === stream);
    await waitFor(() => ['a', 'b'].every((c) => streams.every((s) => seen(c, s) >= 0)), { message: 'each worker to see the pause' });
    await beats(10);
    expect(lateStarts(events, seen)).toEqual([]);
    for (const p of ['slow', 'keyed']) await workers[0]!.resume(p);
    await waitFor(() => streams.every((s) => new Set(startsOf(s).map((e) => e.n)).size === 120), {
      message: 'all handled after the resume',
      timeoutMs: 30_000,
    });
    // What a pause put back came back with the count it had: each started once, at its first delivery.
    expect(counts.filter((c) => c !== 1)).toEqual([]);
    for (const stream of streams) {
      expect(startsOf(stream)).toHaveLength(120);
      await waitFor(async () => (await groupOf(stream)).pending === 0, { message: `${stream} all acked` });
    }
  });

  // No host in it (the PauseWatch alone): the Nest pass runs it.
  it.skipIf(CORE_HOST)(
    'a stream drained at a (re)start after its resume is owed no second drain (its entries may be in hand by then)',
    async () => {
      const stream = `${uniquePrefix()}orders`;
      const pauses = new PauseCommands(redis.client());
      const watch = new PauseWatch({ pauses, group: 'g', streams: [stream], checkMs: 1000, logger: captureLogs().logger });
      await pauses.pause(stream, 'g', 'test');
      await watch.look();
      // A start while paused: not drained, owed.
      expect(watch.drainable()).toEqual([]);
      expect(watch.owesDrain).toBe(false);
      await pauses.resume(stream, 'g');
      await watch.look();
      expect(watch.owesDrain).toBe(true);
      // A restart (an ordered reader's next ownership) drains it before the beat would: nothing owed after.
      expect(watch.drainable()).toEqual([stream]);
      expect(watch.owesDrain).toBe(false);
      expect(watch.takeResumed()).toEqual([]);
    },
  );
});
