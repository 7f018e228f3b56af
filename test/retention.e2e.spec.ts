import type { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { useRedis } from './support/use-redis.js';
import { TRIM_EVERY } from '../libs/redis-streams/src/redis/produce/producer-commands.js';
import { TRIM_SCAN_LIMIT } from '../libs/redis-streams/src/redis/produce/trim-script.js';
import { captureLogs } from './support/logs.js';
import { uniquePrefix } from './support/test-app.js';
import { createGroup } from './support/backlog.js';

const redis = useRedis();

const producer = useProducers();

/** 500 entries; the group acked 200, holds 100 pending, and has not read the last 200. */
async function backlog(admin: Redis, emit: (n: number) => Promise<string>, key: string) {
  await createGroup(admin, key);
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
    await createGroup(admin, key);
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
    const read = (await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1000, 'STREAMS', `${prefix}early`, '>')) as [
      string,
      [string, string[]][],
    ][];
    await admin.xack(`${prefix}early`, 'g', ...read[0]![1].map(([id]) => id));
    for (let i = 0; i < TRIM_EVERY; i++) await lastValueFrom(client.emit('early', { i: 300 + i }));
    expect(await admin.xlen(`${prefix}early`)).toBeLessThan(300);
  });

  it('never trims pending or unread entries of a stream whose ids are above 2^53 ms (a hostile XADD with an explicit id)', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const key = `${prefix}hostile`;
    await createGroup(admin, key);
    // Every later '*' id shares this millisecond part, which a double cannot hold exactly.
    await admin.xadd(key, '9007199254740995-0', 'n', 'hostile');
    for (let i = 0; i < 300; i++) await admin.xadd(key, '*', 'n', String(i));
    const read = (await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 101, 'STREAMS', key, '>')) as [string, [string, string[]][]][];
    const delivered = read[0]![1].map(([id]) => id);
    await admin.xack(key, 'g', ...delivered.slice(0, 100));
    const before = new Set((await admin.xrange(key, '-', '+')).map(([id]) => id));
    const needed = [...before].filter((id) => !delivered.slice(0, 100).includes(id));
    expect(needed).toHaveLength(201); // one pending, two hundred never delivered
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    await lastValueFrom(client.emit('hostile', {}));
    const left = await present(admin, key);
    expect(needed.filter((id) => !left.has(id))).toEqual([]);
  });

  it('trims past a group whose last-delivered id has a sequence near 2^64, without a script error', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const key = `${prefix}maxseq`;
    await createGroup(admin, key);
    for (let i = 0; i < 150; i++) await admin.xadd(key, `5-${i}`, 'n', String(i));
    await admin.xadd(key, '5-18446744073709551614', 'n', 'last');
    await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1000, 'STREAMS', key, '>');
    await admin.xack(key, 'g', ...(await admin.xrange(key, '-', '+')).map(([id]) => id));
    const logs = captureLogs();
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } }, logs.logger);
    await lastValueFrom(client.emit('maxseq', {}));
    expect(logs.lines.filter((l) => l.startsWith('warn'))).toEqual([]);
    // Everything was acked: the length bound applies (all but the newest entries go).
    expect(await admin.xlen(key)).toBeLessThan(100);
  });

  it('takes a maxAgeMs longer than the clock has run (nothing is that old) without failing the write', async () => {
    const prefix = uniquePrefix();
    const logs = captureLogs();
    const { client } = await producer(
      {
        connection: redis.url,
        keyPrefix: prefix,
        streamRetention: { plain: { maxAgeMs: 1e14 }, safe: { maxAgeMs: 1e14, safe: true }, both: { maxAgeMs: 1e14, maxLen: 5 } },
      },
      logs.logger,
    );
    for (const pattern of ['plain', 'safe', 'both']) await expect(lastValueFrom(client.emit(pattern, {}))).resolves.toMatch(/^\d+-\d+$/);
    expect(logs.lines.filter((l) => l.startsWith('warn'))).toEqual([]);
  });

  it('bounds the work of one trim: after a long lag is caught up, one write removes at most 100 entries', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const key = `${prefix}caughtup`;
    await createGroup(admin, key);
    const pipeline = admin.pipeline();
    for (let i = 0; i < 5000; i++) pipeline.xadd(key, '*', 'n', String(i));
    await pipeline.exec();
    const read = (await admin.xreadgroup('GROUP', 'g', 'c', 'COUNT', 5000, 'STREAMS', key, '>')) as [string, [string, string[]][]][];
    await admin.xack(key, 'g', ...read[0]![1].map(([id]) => id));
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    await lastValueFrom(client.emit('caughtup', {}));
    const removed = 5001 - (await admin.xlen(key));
    // The script reads the entries it removes (Lua has no ids-only range): a bounded number per write.
    expect(removed).toBeGreaterThan(0);
    expect(removed).toBeLessThanOrEqual(100);
    expect(TRIM_SCAN_LIMIT).toBeLessThanOrEqual(100);
  });
});
