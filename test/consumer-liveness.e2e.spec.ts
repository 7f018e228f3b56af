import type { Cluster, Redis } from 'ioredis';
import { runCli } from './support/cli.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { waitParked } from './support/parked.js';

// Redis 7.0 does not reset a consumer's idle on its empty XREADGROUP BLOCK reads (a live parked
// worker looks idle for minutes); Valkey 8 does, and adds `inactive`. Run on both:
//   npx vitest run --project node test/consumer-liveness.e2e.spec.ts
//   REDIS_SERVER_BIN=valkey-server npx vitest run --project node test/consumer-liveness.e2e.spec.ts
const redis = useRedis();
const start = useApps();

/** XREADGROUP calls served, over every master on a cluster (the worker parks on each slot's). */
async function xreadgroupCalls(): Promise<number> {
  const admin = redis.client() as Redis | Cluster;
  const nodes = redis.cluster ? (admin as Cluster).nodes('master') : [admin as Redis];
  const infos = await Promise.all(nodes.map((n) => n.info('commandstats')));
  return infos.reduce((sum, info) => sum + Number(/cmdstat_xreadgroup:calls=(\d+)/.exec(info)?.[1] ?? 0), 0);
}

async function consumerRow(key: string, name: string, group = 'g'): Promise<Record<string, unknown> | undefined> {
  const rows = (await redis.client().xinfo('CONSUMERS', key, group)) as unknown[][];
  const row = rows.find((r) => String(r[r.indexOf('name') + 1]) === name);
  return row && Object.fromEntries(Array.from({ length: row.length / 2 }, (_, i) => [String(row[2 * i]), row[2 * i + 1]]));
}

interface Names {
  group: string;
  live: string;
  dead: string;
  /** The dead consumer's group (default: `group`). */
  deadGroup?: string;
}

/** A worker `live` parked with blockMs 1000 after several empty parks, and a consumer `dead` whose process is gone. */
async function liveAndDead({ group, live, dead, deadGroup = group }: Names = { group: 'g', live: 'live', dead: 'dead' }) {
  const prefix = uniquePrefix();
  const options = { connection: redis.connection, keyPrefix: prefix, blockMs: 1000, minIdleMs: 60_000 };
  const gone = await start({ ...options, group: deadGroup, consumer: dead });
  const key = gone.key();
  await waitFor(async () => (await consumerRow(key, dead, deadGroup)) !== undefined, { message: `the consumer "${dead}" in the group` });
  await gone.close();
  await start({ ...options, group, consumer: live });
  // A name Redis refuses as a connection name left the old worker's connections unnamed: any park will do then (one worker runs).
  const parked = group === 'g' && live === 'live' ? 'name=g:live:' : '';
  await waitParked(redis.client(), parked, 'the live worker parked');
  const before = await xreadgroupCalls();
  await waitFor(async () => (await xreadgroupCalls()) >= before + 4, { message: 'four more empty parks', timeoutMs: 15_000 });
  await waitParked(redis.client(), parked, 'the live worker parked again');
  await waitFor(async () => Number((await consumerRow(key, dead, deadGroup))?.idle) >= 1000, { message: `"${dead}" idle past 1000 ms` });
  return { prefix, key };
}

// Redis refuses CLIENT SETNAME outside '!'..'~' (ioredis ignores the refusal): such names are encoded in the connection name.
const UNNAMEABLE: Names[] = [
  { group: 'g', live: 'worker 1', dead: 'dead' },
  { group: 'g', live: 'wörker-1', dead: 'dead' },
  { group: 'order workers', live: 'live', dead: 'dead' },
];

describe('consumer liveness on Redis 7.0 and Valkey 8', () => {
  it('consumers prune --idle-ms 1000 deletes the dead consumer and never the live parked one', async () => {
    const { key } = await liveAndDead();
    const pruned = await runCli(redis, ['consumers', 'prune', key, '--group', 'g', '--idle-ms', '1000', '--json']);
    expect(pruned.stderr).toBe('');
    expect(JSON.parse(pruned.stdout)).toEqual(['dead']);
    expect(await consumerRow(key, 'live')).toBeDefined();
  }, 30_000);

  it.each([
    ['never the live parked one', 'live'],
    ['keeps a live worker named "wörker 1" (a name Redis refuses as a connection name)', 'wörker 1'],
  ])(
    'consumerCleanup deletes the dead consumer and %s',
    async (_what, live) => {
      const { prefix, key } = await liveAndDead({ group: 'g', live, dead: 'dead' });
      const deleted: string[] = [];
      const cleaner = await start(
        consumerOptions(redis, {
          consumer: 'cleaner',
          keyPrefix: prefix,
          blockMs: 1000,
          minIdleMs: 60_000,
          consumerCleanup: { idleMs: 1000, intervalMs: 60_000 },
        }),
      );
      cleaner.server.on('consumersDeleted', (stream: string, names: string[]) => stream === key && deleted.push(...names));
      await waitFor(() => deleted.length > 0, { message: 'the cleanup to delete a consumer' });
      expect(deleted).toEqual(['dead']);
      expect(await consumerRow(key, live)).toBeDefined();
    },
    30_000,
  );

  it('inspect says which figure its idle time is, and which consumers have a connection', async () => {
    const { key } = await liveAndDead();
    const json = await runCli(redis, ['inspect', key, '--json']);
    const [report] = JSON.parse(json.stdout) as { groups: { consumers: Record<string, unknown>[] }[] }[];
    const byName = Object.fromEntries(report!.groups[0]!.consumers.map((c) => [c.name, c]));
    expect(byName.live).toMatchObject({ connected: true });
    expect(byName.dead).toMatchObject({ connected: false });
    const text = await runCli(redis, ['inspect', key]);
    expect(text.stdout).toMatch(/live {2}pending 0 {2}idle .* since its last (read|delivery).* {2}connected\n/);
    expect(text.stdout).toMatch(/dead {2}pending 0 {2}idle .* {2}no connection\n/);
  }, 30_000);

  it.each(UNNAMEABLE)(
    'consumers prune and inspect see a live worker named $live in group $group as connected',
    async (names) => {
      const { key } = await liveAndDead(names);
      const pruned = await runCli(redis, ['consumers', 'prune', key, '--group', names.group, '--idle-ms', '1000', '--json']);
      expect(JSON.parse(pruned.stdout)).toEqual(['dead']);
      expect(await consumerRow(key, names.live, names.group)).toBeDefined();
      const json = await runCli(redis, ['inspect', key, '--group', names.group, '--json']);
      const [report] = JSON.parse(json.stdout) as { groups: { consumers: Record<string, unknown>[] }[] }[];
      expect(report!.groups[0]!.consumers.find((c) => c.name === names.live)).toMatchObject({ connected: true });
    },
    30_000,
  );

  it('names that read two ways do not collide: a live "b:c" of group "a" does not keep a dead "c" of group "a:b"', async () => {
    const { key } = await liveAndDead({ group: 'a', live: 'b:c', deadGroup: 'a:b', dead: 'c' });
    const pruned = await runCli(redis, ['consumers', 'prune', key, '--group', 'a:b', '--idle-ms', '1000', '--json']);
    expect(JSON.parse(pruned.stdout)).toEqual(['c']);
  }, 30_000);
});
