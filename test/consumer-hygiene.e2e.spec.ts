import { RedisStreamsServer } from 'nestjs-redis-streams';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

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
  await r.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
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
    await waitFor(async () => [...(await consumers(key)).values()].every(([, idle]) => idle >= 300), { message: 'every consumer idle past 300 ms' });
    const pruned: string[] = [];
    const app = await start({ connection: redis.connection, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000, consumerCleanup: { idleMs: 300, intervalMs: 60_000 } });
    app.server.on('consumersDeleted', (_stream: string, names: string[]) => pruned.push(...names));
    await waitFor(() => pruned.length === 50, { message: '50 consumers deleted' });
    expect(pruned.sort()).toEqual([...gone].sort());
    const left = await consumers(key);
    expect([...left.keys()].sort()).toEqual(['live', 'owner']);
    expect(left.get('owner')![0]).toBe(1);
  });

  it('runs at most once per interval across all workers of the group', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await deadConsumers(key, 10);
    await waitFor(async () => [...(await consumers(key)).values()].every(([, idle]) => idle >= 300), { message: 'idle past 300 ms' });
    const runs: string[] = [];
    const options = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, consumerCleanup: { idleMs: 300, intervalMs: 60_000 } };
    const [a, b] = await Promise.all([start({ ...options, consumer: 'a' }), start({ ...options, consumer: 'b' })]);
    a.server.on('consumersDeleted', (_s: string, names: string[]) => runs.push(`a:${names.length}`));
    b.server.on('consumersDeleted', (_s: string, names: string[]) => runs.push(`b:${names.length}`));
    await waitFor(async () => (await consumers(key)).size === 2, { message: 'the dead consumers deleted' });
    // Ten more left behind right after: within the interval nobody deletes them, however many workers beat.
    for (let i = 0; i < 10; i++) await redis.client().call('XGROUP', 'CREATECONSUMER', key, 'g', `late-${i}`);
    await waitFor(async () => [...(await consumers(key)).entries()].filter(([n]) => n.startsWith('late-')).every(([, [, idle]]) => idle >= 600), { message: 'late ones idle' });
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
    const app = await start({ connection: redis.connection, group: 'g', consumer: 'janitor', keyPrefix: prefix, blockMs: 50, minIdleMs: 60_000, consumerCleanup: { idleMs: 1, intervalMs: 20 } });
    let runs = 0;
    app.server.on('consumersDeleted', () => runs++);
    let delivered = 0;
    for (let i = 0; delivered + app.recorder.calls.length < 300; i++) {
      const reply = (await r.xreadgroup('GROUP', 'g', names[i % names.length]!, 'COUNT', 1, 'STREAMS', key, '>')) as [string, unknown[]][] | null;
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
});
