import type { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { TRIM_EVERY } from '../libs/redis-streams/src/redis/producer-commands.js';
import { uniquePrefix } from './support/test-app.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

const producer = useProducers();

/** 500 entries; the group acked 200, holds 100 pending, and has not read the last 200. */
async function backlog(admin: Redis, emit: (n: number) => Promise<string>, key: string) {
  await admin.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
  const ids: string[] = [];
  for (let i = 0; i < 500; i++) ids.push(await emit(i));
  await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 300, 'STREAMS', key, '>');
  await admin.xack(key, 'g', ...ids.slice(0, 200));
  return { acked: ids.slice(0, 200), needed: ids.slice(200) };
}

const present = async (admin: Redis, key: string) => new Set((await admin.xrange(key, '-', '+')).map(([id]) => id));

describe('retention', () => {
  it('safe mode never trims an entry a group has pending or unread; plain maxLen does', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const { client } = await producer({
      connection: redis.url,
      keyPrefix: prefix,
      streamRetention: { plain: { maxLen: 100 }, safe: { maxLen: 100, safe: true } },
    });
    for (const pattern of ['plain', 'safe']) {
      const key = `${prefix}${pattern}`;
      const emit = (n: number) => lastValueFrom(client.emit(pattern, { n })) as Promise<string>;
      // Write the backlog without trimming (a group must exist first), then one trimming write.
      const raw = (n: number) => admin.xadd(key, '*', 'data', JSON.stringify({ n })) as Promise<string>;
      const { acked, needed } = await backlog(admin, raw, key);
      await emit(500);
      const left = await present(admin, key);
      if (pattern === 'plain') {
        // MAXLEN ~ 100 cut into entries the group still needed.
        expect(needed.filter((id) => !left.has(id)).length).toBeGreaterThan(0);
      } else {
        expect(needed.filter((id) => !left.has(id))).toEqual([]);
        // … and it did trim acked entries.
        expect(acked.filter((id) => !left.has(id)).length).toBeGreaterThan(0);
      }
    }
  });

  it('safe mode trims by age too, and trims all the way once the group has caught up', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const key = `${prefix}aged`;
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxAgeMs: 1, safe: true } });
    await admin.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) ids.push((await admin.xadd(key, '*', 'n', String(i)))!);
    const last = (await lastValueFrom(client.emit('aged', {}))) as string;
    // Nothing was read yet: everything stays.
    expect((await present(admin, key)).size).toBe(301);
    await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1000, 'STREAMS', key, '>');
    await admin.xack(key, 'g', ...ids, last);
    // The trim script runs on one write in TRIM_EVERY: within that many, the stream is trimmed.
    for (let i = 0; i < TRIM_EVERY; i++) await lastValueFrom(client.emit('aged', {}));
    // All acked and older than 1 ms: trimmed down to what MINID ~ keeps (whole nodes only).
    expect((await present(admin, key)).size).toBeLessThan(301);
  });

  it('safe mode keeps every entry while the stream has no group yet (nobody has read anything)', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    for (let i = 0; i < 300; i++) await lastValueFrom(client.emit('early', { i }));
    expect(await admin.xlen(`${prefix}early`)).toBe(300);
    // Once a group exists and has read and acked everything, the same policy trims again.
    await admin.xgroup('CREATE', `${prefix}early`, 'g', '0');
    const read = (await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1000, 'STREAMS', `${prefix}early`, '>')) as [string, [string, string[]][]][];
    await admin.xack(`${prefix}early`, 'g', ...read[0]![1].map(([id]) => id));
    for (let i = 0; i < TRIM_EVERY; i++) await lastValueFrom(client.emit('early', { i: 300 + i }));
    expect(await admin.xlen(`${prefix}early`)).toBeLessThan(300);
  });
});
