import type { Cluster, Redis } from 'ioredis';
import { runCli } from './support/cli.js';
import { useRedis } from './support/use-redis.js';
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

async function consumerRow(key: string, name: string): Promise<Record<string, unknown> | undefined> {
  const rows = (await redis.client().xinfo('CONSUMERS', key, 'g')) as unknown[][];
  const row = rows.find((r) => String(r[r.indexOf('name') + 1]) === name);
  return row && Object.fromEntries(Array.from({ length: row.length / 2 }, (_, i) => [String(row[2 * i]), row[2 * i + 1]]));
}

/** A worker `live` parked with blockMs 1000 after several empty parks, and a consumer `dead` whose process is gone. */
async function liveAndDead() {
  const prefix = uniquePrefix();
  const options = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 1000, minIdleMs: 60_000 };
  const dead = await start({ ...options, consumer: 'dead' });
  const key = dead.key();
  await waitFor(async () => (await consumerRow(key, 'dead')) !== undefined, { message: 'the consumer "dead" in the group' });
  await dead.close();
  await start({ ...options, consumer: 'live' });
  await waitParked(redis.client(), 'name=g:live:', 'the live worker parked');
  const before = await xreadgroupCalls();
  await waitFor(async () => (await xreadgroupCalls()) >= before + 4, { message: 'four more empty parks', timeoutMs: 15_000 });
  await waitParked(redis.client(), 'name=g:live:', 'the live worker parked again');
  await waitFor(async () => Number((await consumerRow(key, 'dead'))?.idle) >= 1000, { message: '"dead" idle past 1000 ms' });
  return { prefix, key };
}

describe('consumer liveness on Redis 7.0 and Valkey 8', () => {
  it('consumers prune --idle-ms 1000 deletes the dead consumer and never the live parked one', async () => {
    const { key } = await liveAndDead();
    const pruned = await runCli(redis, ['consumers', 'prune', key, '--group', 'g', '--idle-ms', '1000', '--json']);
    expect(pruned.stderr).toBe('');
    expect(JSON.parse(pruned.stdout)).toEqual(['dead']);
    expect(await consumerRow(key, 'live')).toBeDefined();
  }, 30_000);

  it('consumerCleanup deletes the dead consumer and never the live parked one', async () => {
    const { prefix, key } = await liveAndDead();
    const deleted: string[] = [];
    const cleaner = await start({
      connection: redis.connection,
      group: 'g',
      consumer: 'cleaner',
      keyPrefix: prefix,
      blockMs: 1000,
      minIdleMs: 60_000,
      consumerCleanup: { idleMs: 1000, intervalMs: 60_000 },
    });
    cleaner.server.on('consumersDeleted', (stream: string, names: string[]) => stream === key && deleted.push(...names));
    await waitFor(() => deleted.length > 0, { message: 'the cleanup to delete a consumer' });
    expect(deleted).toEqual(['dead']);
    expect(await consumerRow(key, 'live')).toBeDefined();
  }, 30_000);

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
});
