import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup, groupOnNewStream } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

/** Consumer name → [pending, idle ms], from XINFO CONSUMERS. */
async function consumers(key: string): Promise<Map<string, [number, number]>> {
  const rows = (await redis.client().xinfo('CONSUMERS', key, 'g')) as unknown[][];
  return new Map(
    rows.map((row) => {
      const field = (name: string) => row[row.indexOf(name) + 1];
      return [String(field('name')), [Number(field('pending')), Number(field('idle'))]];
    }),
  );
}

/** `n` consumers left behind by restarts under new names: in the group, owning nothing. */
async function deadConsumers(key: string, n: number): Promise<string[]> {
  const r = redis.client();
  await createGroup(r, key);
  const names = Array.from({ length: n }, (_, i) => `gone-${i}`);
  for (const name of names) await r.call('XGROUP', 'CREATECONSUMER', key, 'g', name);
  return names;
}

describe('consumer hygiene (consumerCleanup)', () => {
  it('deletes 50 idle consumers that own nothing, keeps one that owns a pending entry, and never itself', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const gone = await deadConsumers(key, 50);
    const r = redis.client();
    await r.xadd(key, '*', 'n', '1');
    // An idle consumer that still owns an entry: deleting it would drop that entry from the PEL.
    await r.xreadgroup('GROUP', 'g', 'owner', 'COUNT', 1, 'STREAMS', key, '>');
    await waitFor(async () => [...(await consumers(key)).values()].every(([, idle]) => idle >= 300), {
      message: 'every consumer idle past 300 ms',
    });
    const pruned: string[] = [];
    const app = await start(
      consumerOptions(redis, {
        consumer: 'live',
        keyPrefix: prefix,
        blockMs: 100,
        minIdleMs: 60_000,
        consumerCleanup: { idleMs: 300, intervalMs: 60_000 },
      }),
    );
    app.server.on('consumersDeleted', (_stream: string, names: string[]) => pruned.push(...names));
    await waitFor(() => pruned.length === 50, { message: '50 consumers deleted' });
    expect(pruned.sort()).toEqual([...gone].sort());
    // The worker's own consumer appears with its first read, which may come after the cleanup ran.
    const left = await waitFor(
      async () => {
        const now = await consumers(key);
        return now.has('live') && now;
      },
      { message: 'the worker’s own consumer' },
    );
    expect([...left.keys()].sort()).toEqual(['live', 'owner']);
    expect(left.get('owner')![0]).toBe(1);
  });

  it('runs at most once per interval across all workers of the group', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await deadConsumers(key, 10);
    await waitFor(async () => [...(await consumers(key)).values()].every(([, idle]) => idle >= 300), { message: 'idle past 300 ms' });
    const runs: string[] = [];
    const options = {
      connection: redis.connection,
      group: 'g',
      keyPrefix: prefix,
      blockMs: 100,
      consumerCleanup: { idleMs: 300, intervalMs: 60_000 },
    };
    const [a, b] = await Promise.all([start({ ...options, consumer: 'a' }), start({ ...options, consumer: 'b' })]);
    a.server.on('consumersDeleted', (_s: string, names: string[]) => runs.push(`a:${names.length}`));
    b.server.on('consumersDeleted', (_s: string, names: string[]) => runs.push(`b:${names.length}`));
    await waitFor(async () => (await consumers(key)).size === 2, { message: 'the dead consumers deleted' });
    // Ten more left behind right after: within the interval nobody deletes them, however many workers beat.
    for (let i = 0; i < 10; i++) await redis.client().call('XGROUP', 'CREATECONSUMER', key, 'g', `late-${i}`);
    await waitFor(
      async () => [...(await consumers(key)).entries()].filter(([n]) => n.startsWith('late-')).every(([, [, idle]]) => idle >= 600),
      { message: 'late ones idle' },
    );
    expect([...(await consumers(key)).keys()].filter((n) => n.startsWith('late-'))).toHaveLength(10);
    expect(runs.length).toBeLessThanOrEqual(1);
  });

  it('loses nothing when entries are delivered to consumers while the cleanup deletes them', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const names = await deadConsumers(key, 40);
    const r = redis.client();
    for (let i = 0; i < 300; i++) await r.xadd(key, '*', 'n', String(i));
    // The worker cleans every 20 ms with a 1 ms idle threshold: it keeps deleting the consumers a
    // second reader delivers entries to, and that reader keeps re-creating them.
    const app = await start(
      consumerOptions(redis, {
        consumer: 'janitor',
        keyPrefix: prefix,
        blockMs: 50,
        minIdleMs: 60_000,
        consumerCleanup: { idleMs: 1, intervalMs: 20 },
      }),
    );
    let runs = 0;
    app.server.on('consumersDeleted', () => runs++);
    let delivered = 0;
    for (let i = 0; delivered + app.recorder.calls.length < 300; i++) {
      const reply = (await r.xreadgroup('GROUP', 'g', names[i % names.length]!, 'COUNT', 1, 'STREAMS', key, '>')) as
        [string, unknown[]][] | null;
      delivered += reply?.[0]?.[1].length ?? 0;
      if (!reply) await waitFor(() => delivered + app.recorder.calls.length === 300 || runs > 0, { message: 'the rest handled' });
    }
    await waitFor(() => app.settled.length === app.recorder.calls.length, { message: 'the worker to settle what it took' });
    expect(runs).toBeGreaterThan(0);
    // Every entry the reader took is still pending (under its consumer): none vanished with a deleted one.
    const [pending] = (await r.xpending(key, 'g')) as [number];
    expect(pending).toBe(delivered);
    expect(delivered).toBeGreaterThan(0);
  });

  it('cleans each group of a stream on its own schedule (one lock per group)', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r, 'orders', 'ga');
    await r.xgroup('CREATE', key, 'gb', '0');
    for (let i = 0; i < 3; i++) {
      await r.call('XGROUP', 'CREATECONSUMER', key, 'ga', `gone-${i}`);
      await r.call('XGROUP', 'CREATECONSUMER', key, 'gb', `gone-${i}`);
    }
    const idle = async (group: string) =>
      ((await r.xinfo('CONSUMERS', key, group)) as unknown[][]).every((row) => Number(row[row.indexOf('idle') + 1]) >= 300);
    await waitFor(async () => (await idle('ga')) && (await idle('gb')), { message: 'idle past 300 ms' });
    const options = { connection: redis.connection, keyPrefix: prefix, blockMs: 100, consumerCleanup: { idleMs: 300, intervalMs: 60_000 } };
    await start({ ...options, group: 'ga', consumer: 'a' });
    await start({ ...options, group: 'gb', consumer: 'b' });
    const names = async (group: string) =>
      ((await r.xinfo('CONSUMERS', key, group)) as unknown[][]).map((row) => String(row[row.indexOf('name') + 1]));
    // Group gb's cleanup is not shut out by ga's lock, taken just before within the same interval.
    await waitFor(async () => (await names('ga')).join() === 'a' && (await names('gb')).join() === 'b', { message: 'both groups cleaned' });
  });

  it('says once, naming the key, when its lock key is a key of someone else (no expiry)', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await deadConsumers(key, 3);
    const lock = CLUSTER_MODE ? `{${key}}:cleanup:g` : `${key}:cleanup:g`;
    await redis.client().set(lock, 'a user value');
    const logs = captureLogs();
    await start(
      consumerOptions(redis, { consumer: 'c', keyPrefix: prefix, blockMs: 100, consumerCleanup: { idleMs: 1000, intervalMs: 50 } }),
      { logger: logs.logger },
    );
    const about = () => logs.lines.filter((l) => l.includes(`lock key "${lock}" exists without an expiry`));
    await waitFor(() => about().length === 1, { message: 'the warning' });
    // Several intervals later: still once, and the user's key untouched.
    await waitFor(async () => (await consumers(key)).size === 4 && logs.lines.length > 0, { message: 'intervals to pass' });
    expect(about()).toHaveLength(1);
    expect(await redis.client().get(lock)).toBe('a user value');
  });

  // ACL users live on one node: the one-node run covers it.
  it.skipIf(CLUSTER_MODE)(
    "with README's minimal ACL and the rights it names for consumerCleanup, a second worker's cleanup within the interval finds the lock and fails nothing",
    async () => {
      const readme = readFileSync(new URL('../docs/guide/security.md', import.meta.url), 'utf8');
      const rights = /`consumerCleanup` needs `([^`]+)`/.exec(readme)![1]!.split(' ');
      const prefix = uniquePrefix();
      const key = `${prefix}orders`;
      await deadConsumers(key, 2);
      const name = `clean-${prefix.slice(2, 10)}`;
      const connection = await aclUser(redis.client(), redis.port, name, prefix, [...CONSUMER_ACL, ...rights]);
      const conn = new Redis(connection);
      try {
        const commands = new StreamCommands(conn, 'g');
        const lock = `${prefix}orders:cleanup:g`;
        // The first run takes the lock and deletes; the second, within intervalMs, finds the lock.
        expect(await commands.deleteIdleConsumers(key, lock, 'a', 1, 60_000)).toHaveLength(2);
        expect(await commands.deleteIdleConsumers(key, lock, 'b', 1, 60_000)).toBeNull();
      } finally {
        conn.disconnect();
        await redis.client().call('ACL', 'DELUSER', name);
      }
    },
  );

  it.skipIf(CLUSTER_MODE)('without the ACL rights, says once which rights it needs, and the loop goes on', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await deadConsumers(key, 3);
    const user = `hyg-${prefix.slice(2, 10)}`;
    await redis.client().call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '+@all', '-xinfo|consumers', '-xgroup|delconsumer');
    const logs = captureLogs();
    const app = await start(
      {
        connection: { host: '127.0.0.1', port: redis.port, username: user, password: 'secret' },
        group: 'g',
        consumer: 'c',
        keyPrefix: prefix,
        blockMs: 100,
        consumerCleanup: { idleMs: 1, intervalMs: 50 },
      },
      { logger: logs.logger },
    );
    const failures = () => logs.lines.filter((l) => l.startsWith('warn') && l.includes(`consumer cleanup of "${key}"`));
    await waitFor(() => failures().length >= 1, { message: 'the failure' });
    expect(failures()[0]).toContain('it needs +xinfo|consumers +xgroup|delconsumer +set');
    // idleMs 1 is below blockMs 100: parked live consumers would be deleted too, and it says so.
    expect(logs.text()).toContain('consumerCleanup.idleMs (1) is not well above blockMs (100)');
    await redis.client().xadd(key, '*', 'n', '1');
    await waitFor(() => app.settled.length === 1, { message: 'the loop to handle an entry' });
    expect(failures()).toHaveLength(1);
  });
});
