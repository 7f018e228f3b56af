/**
 * deleteOnAck (XACKDEL, Redis 8.2+): acked and dead-lettered entries leave the stream in the ack's
 * own command; what is unread or pending stays. The producer's safe retention trims with ACKED there.
 * On a server without XACKDEL (Redis 7.x, Valkey 8–9) the option is refused at start.
 */
import type { ChildProcess } from 'node:child_process';
import { lastValueFrom } from 'rxjs';
import { RedisStreamsError, UnsupportedServerError } from 'nestjs-redis-streams';
import { UnsupportedServerError as CoreUnsupportedServerError } from 'nestjs-redis-streams/core';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { parseGroupInfo } from '../libs/redis-streams/src/redis/replies/info-replies.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { createGroup } from './support/backlog.js';
import { parseInfo } from './support/redis-info.js';
import { captureLogs } from './support/logs.js';
import { requireBuilt } from './support/built.js';
import { startFixture } from './support/fixture-process.js';
import { pendingCount, pendingIds } from './support/pending.js';
import { useProducers } from './support/producer.js';
import { deadLetterKey } from './support/redis-server.js';
import { probeServerFeatures } from './support/server-probe.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const features = await probeServerFeatures();
const redis = useRedis();
const start = useApps();
const producer = useProducers();

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** `n` entries written to `key` (the group `g` created first, as a consumer's start would). */
async function written(key: string, n: number, group = 'g'): Promise<string[]> {
  const r = redis.client();
  await createGroup(r, key, group);
  const pipeline = r.pipeline();
  for (let i = 0; i < n; i++) pipeline.xadd(key, '*', 'data', JSON.stringify({ i }));
  return ((await pipeline.exec()) ?? []).map(([, id]) => id as string);
}

const present = async (key: string, ids: readonly string[]): Promise<string[]> => {
  const left = new Set((await redis.client().xrange(key, '-', '+')).map(([id]) => id));
  return ids.filter((id) => left.has(id));
};

const options = (prefix: string, extra: object = {}) => ({
  connection: redis.url,
  group: 'g',
  consumer: 'c',
  keyPrefix: prefix,
  blockMs: 100,
  minIdleMs: 1000,
  deleteOnAck: 'this-group' as const,
  ...extra,
});

describe.runIf(features.ackDelete)(`deleteOnAck on ${features.server} (XACKDEL)`, () => {
  it("'this-group': acked entries are gone from the stream; a failed one stays pending, is retried with its id, and goes once it succeeds", async () => {
    const prefix = uniquePrefix();
    const ids = await written(`${prefix}orders`, 30);
    const app = await start(options(prefix, { retry: { backoff: { type: 'fixed', delayMs: 300 } } }));
    const failing = ids[7]!;
    app.recorder.behavior = (call) => {
      if (call.id === failing && call.deliveryCount === 1) throw new Error('first try fails');
    };
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 29, { message: '29 entries acked' });
    // Everything acked left the stream; the failed entry is still there and pending, waiting for its retry.
    expect(await present(app.key(), ids)).toEqual([failing]);
    expect(await pendingIds(redis, app.key())).toEqual([failing]);
    expect((await app.consumer.health()).server?.features).toContain('ack-delete');
    await waitFor(() => app.settled.some((e) => e.id === failing && e.outcome === 'acked'), { message: 'the retry acked' });
    expect(app.recorder.calls.filter((c) => c.id === failing).map((c) => c.deliveryCount)).toEqual([1, 2]);
    expect(await redis.client().xlen(app.key())).toBe(0);
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it('acks of several streams in one pipelined round trip delete on each; an entry an operator acked meanwhile is counted short, and stays', async () => {
    const prefix = uniquePrefix();
    const orders = await written(`${prefix}orders`, 10);
    const payments = await written(`${prefix}payments`, 10);
    const logs = captureLogs();
    const app = await start(options(prefix, { batchSize: 20 }), { logger: logs.logger });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    app.recorder.behavior = (call) => (call.id === orders[2] ? held : undefined);
    await waitFor(() => app.recorder.calls.some((c) => c.id === orders[2]), { message: 'orders[2] in hand' });
    await redis.client().xack(app.key('orders'), 'g', orders[2]!);
    release();
    await waitFor(() => app.settled.length === 20, { message: '20 entries settled' });
    await waitFor(() => logs.lines.some((l) => l.includes('found 1 entry no longer pending')), { message: 'the short ack explained' });
    // XACKDEL said -1 for it (not pending): not deleted, as XACK would not have acked it.
    expect(await present(app.key('orders'), orders)).toEqual([orders[2]]);
    expect(await present(app.key('payments'), payments)).toEqual([]);
  });

  it('a dead-lettered entry is gone from its stream and kept in the dead-letter stream, with its fields', async () => {
    const prefix = uniquePrefix();
    const [poison, ...rest] = await written(`${prefix}orders`, 5);
    const app = await start(options(prefix, { maxDeliveries: 2, retry: { backoff: { type: 'fixed', delayMs: 100 } } }));
    app.recorder.behavior = (call) => {
      if (call.id === poison) throw new Error('never succeeds');
    };
    await waitFor(() => app.settled.some((e) => e.outcome === 'dead-lettered'), { message: 'the poison entry dead-lettered' });
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 4, { message: 'the others acked' });
    expect(await present(app.key(), [poison!, ...rest])).toEqual([]);
    const letters = (await redis.client().xrange(deadLetterKey(app.key()), '-', '+')).map(([id, f]) => decodeDeadLetter(id, f));
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ sourceId: poison, deliveryCount: 2, fields: ['data', JSON.stringify({ i: 0 })] });
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it('an ACL that denies XACKDEL refuses the start, naming the right to grant, instead of running every handler again and again', async () => {
    const prefix = uniquePrefix();
    const user = await aclUser(redis.client(), redis.port, `noackdel-${prefix.slice(2, 10)}`, prefix, [
      ...CONSUMER_ACL,
      '+command|info',
      '+command|docs',
    ]);
    await expect(start({ ...options(prefix), connection: user })).rejects.toThrow(
      /deleteOnAck: 'this-group' needs XACKDEL.*NOPERM.*grant the user \+xackdel/,
    );
  });

  it("'this-group' on a stream other groups read too is logged at start, naming them", async () => {
    const prefix = uniquePrefix();
    await createGroup(redis.client(), `${prefix}orders`, 'audit');
    const logs = captureLogs();
    await start(options(prefix), { logger: logs.logger });
    await waitFor(() => logs.lines.some((l) => l.includes('the stream has other groups too ("audit")')), { message: 'the warning' });
    expect(logs.lines.filter((l) => l.includes('other groups too'))).toHaveLength(1);
  });

  it("'all-groups': an entry stays until the second group has acked it too", async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await createGroup(redis.client(), key, 'other');
    const ids = await written(key, 20, 'g');
    const first = await start(options(prefix, { deleteOnAck: 'all-groups' }));
    await waitFor(() => first.settled.length === 20, { message: "group g's 20 acks" });
    // Group "other" has read nothing yet: every entry is still needed.
    expect(await present(key, ids)).toEqual(ids);
    // It reads half, and acks only what its handler does not fail.
    const second = await start(options(prefix, { group: 'other', consumer: 'o', deleteOnAck: 'all-groups', batchSize: 5 }));
    second.recorder.behavior = (call) => {
      if (call.id === ids[3]) throw new Error('left pending in "other"');
    };
    await waitFor(() => second.settled.length === 20, { message: "group other's 20 settles" });
    expect(await present(key, ids)).toEqual([ids[3]]);
    await waitFor(async () => (await redis.client().xlen(key)) === 0, { message: "the last entry deleted at other's retry" });
  });

  it('a kill -9 of the worker mid-batch loses nothing: every entry is handled, and the stream ends empty', async () => {
    requireBuilt('libs/redis-streams/dist/esm/core/index.js');
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const counts = `${prefix}handled`;
    const ids = await written(key, 2000);
    // Killed mid-way, with a batch in hand: the worker holds its 730th handling (730 = 14 batches of 50 and 30).
    const { child } = await startFixture(children, 'ack-delete-worker.mjs', [redis.url, prefix, 'doomed', counts, 'this-group', '730']);
    await waitFor(async () => (await redis.client().hlen(counts)) >= 730, { message: 'a third of the entries handled' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect((await pendingIds(redis, key, { consumer: 'doomed' })).length).toBeGreaterThan(0);
    const rescuer = await start(options(prefix, { consumer: 'rescuer', batchSize: 50 }));
    rescuer.recorder.behavior = (call) => redis.client().hincrby(counts, call.id, 1);
    await waitFor(async () => (await redis.client().hlen(counts)) === ids.length && (await redis.client().xlen(key)) === 0, {
      message: 'every entry handled, and the stream empty',
      timeoutMs: 30_000,
    });
    const handled = await redis.client().hgetall(counts);
    const lost = ids.filter((id) => handled[id] === undefined);
    const twice = ids.filter((id) => Number(handled[id]) > 1);
    expect(lost).toEqual([]);
    // At least once: only what the killed worker had in hand (two batches with the read-ahead) runs again.
    expect(twice.length).toBeLessThanOrEqual(100);
    expect(await pendingCount(redis, key)).toBe(0);
  });
});

describe.runIf(features.ackDelete)(`what deleting on ack does to the lag figures, on ${features.server}`, () => {
  it("health's lag stays exact up to 100 undelivered entries; past that it is unknown while a pending entry sits below deleted ones", async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const r = redis.client();
    const ids = await written(key, 10);
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 10, 'STREAMS', key, '>');
    // What deleteOnAck does when the first entry failed and the other nine succeeded.
    await r.call('XACKDEL', key, 'g', 'KEEPREF', 'IDS', 9, ...ids.slice(1));
    const more = async (n: number) => {
      for (let i = 0; i < n; i++) await r.xadd(key, '*', 'n', String(i));
    };
    const commands = new StreamCommands(r, 'g');
    await more(50);
    // Redis cannot tell its lag (entries deleted after the first entry's id), health counts it: 50.
    expect(parseGroupInfo(await r.xinfo('GROUPS', key), 'g')!.reportedLag).toBeNull();
    expect((await commands.groupInfo(key))!.lag).toBe(50);
    await more(100);
    expect((await commands.groupInfo(key))!.lag).toBeNull();
    // Once the pending entry is acked (and deleted) the hole is gone and Redis' figure is back.
    await r.call('XACKDEL', key, 'g', 'KEEPREF', 'IDS', 1, ids[0]!);
    expect(parseGroupInfo(await r.xinfo('GROUPS', key), 'g')).toMatchObject({ reportedLag: 150, entriesRead: 10 });
    expect((await commands.groupInfo(key))!.lag).toBe(150);
  });
});

describe.runIf(features.ackDelete)(`the producer's safe retention on ${features.server} (XTRIM … ACKED in the trim script)`, () => {
  /** 600 entries: the group acked 100, holds the 101st pending, acked 200 after it, has 100 more pending, and has not read the last 199. */
  async function mixedBacklog(key: string): Promise<{ acked: string[]; needed: string[] }> {
    const ids = await written(key, 600);
    const r = redis.client();
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 401, 'STREAMS', key, '>');
    await r.xack(key, 'g', ...ids.slice(0, 100), ...ids.slice(101, 301));
    return { acked: [...ids.slice(0, 100), ...ids.slice(101, 301)], needed: [ids[100]!, ...ids.slice(301)] };
  }

  it('never drops an unread or pending entry, and trims the acked ones behind a pending one', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const { acked, needed } = await mixedBacklog(key);
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    // The script trims on a stream's first write and every 20th: four calls, each over at most 100 entries (the pending one among them).
    for (let i = 0; i < 61; i++) await lastValueFrom(client.emit('orders', { i }));
    expect(await present(key, needed)).toEqual(needed);
    // Past the pending 101st entry: the plain script (Redis 7) stops there, ACKED goes on.
    expect(await present(key, acked)).toEqual([]);
  });

  it('keeps everything while the stream has no group (ACKED alone would trim it: no group, nothing referenced)', async () => {
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    for (let i = 0; i < 300; i++) await lastValueFrom(client.emit('early', { i }));
    expect(await redis.client().xlen(`${prefix}early`)).toBe(300);
  });

  it('keeps what a second group has not read, by age too', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const ids = await written(key, 300);
    await createGroup(redis.client(), key, 'late');
    await redis.client().xreadgroup('GROUP', 'g', 'c', 'COUNT', 300, 'STREAMS', key, '>');
    await redis.client().xack(key, 'g', ...ids);
    await redis.client().xreadgroup('GROUP', 'late', 'c', 'COUNT', 100, 'STREAMS', key, '>');
    await redis.client().xack(key, 'late', ...ids.slice(0, 50));
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxAgeMs: 1, safe: true } });
    for (let i = 0; i < 21; i++) await lastValueFrom(client.emit('orders', { i }));
    // Group "late" acked 50, holds 50 pending and has not read 200: those stay, the 50 go.
    expect(await present(key, ids)).toEqual(ids.slice(50));
  });
});

describe.runIf(!features.ackDelete)(`deleteOnAck on ${features.server} (no XACKDEL)`, () => {
  it('is refused at start, naming the option and the server, with an UnsupportedServerError (a RedisStreamsError)', async () => {
    const refused = await start(options(uniquePrefix())).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect((refused as Error).message).toContain(
      `nestjs-redis-streams: unsupported server: deleteOnAck: 'this-group' needs XACKDEL (Redis 8.2 or later); the server is ${features.server}: remove deleteOnAck, or run Redis 8.2 or later`,
    );
    // What docs/retention.md names: one class to catch, from either entry point, still a RedisStreamsError.
    expect(refused).toBeInstanceOf(UnsupportedServerError);
    expect(refused).toBeInstanceOf(CoreUnsupportedServerError);
    expect(refused).toBeInstanceOf(RedisStreamsError);
    expect((refused as Error).name).toBe('UnsupportedServerError');
  });

  it('the producer’s safe retention takes the plain trim script, which stops at the oldest pending entry', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const ids = await written(key, 300);
    await redis.client().xreadgroup('GROUP', 'g', 'c', 'COUNT', 300, 'STREAMS', key, '>');
    await redis.client().xack(key, 'g', ...ids.slice(0, 100), ...ids.slice(101));
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    for (let i = 0; i < 41; i++) await lastValueFrom(client.emit('orders', { i }));
    expect((await present(key, ids))[0]).toBe(ids[100]);
    expect(await present(key, ids.slice(101))).toEqual(ids.slice(101));
  });
});

describe('on any server', () => {
  it('the client detects the server’s features once per connection, and again after a reconnect', async (ctx) => {
    if (!redis.owned) ctx.skip(); // restarts the server
    const prefix = uniquePrefix();
    const lookups = async () =>
      Number(/calls=(\d+)/.exec(parseInfo(await redis.client().info('commandstats'))['cmdstat_command|info'] ?? '')?.[1] ?? 0);
    const before = await lookups();
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix, retention: { maxLen: 10, safe: true } });
    for (let i = 0; i < 30; i++) await lastValueFrom(client.emit('orders', { i }));
    expect((await lookups()) - before).toBe(1);
    await redis.restart();
    await waitFor(async () => (await lookups()) === 1, { message: 'a lookup on the new server, once the client reconnected' });
    for (let i = 0; i < 30; i++) await lastValueFrom(client.emit('orders', { i }));
    expect(await lookups()).toBe(1);
  });

  it('deleteOnAck is refused, saying which rights are missing, when the user may not look the commands up (COMMAND INFO)', async () => {
    const prefix = uniquePrefix();
    const user = await aclUser(redis.client(), redis.port, `nocmd-${prefix.slice(2, 10)}`, prefix, [
      ...CONSUMER_ACL,
      ...(features.ackDelete ? ['+xackdel'] : []),
    ]);
    await expect(start({ ...options(prefix), connection: user })).rejects.toThrow(
      /deleteOnAck: 'this-group' needs XACKDEL \(Redis 8\.2 or later\); the server is .* and refused COMMAND INFO \(NOPERM.*\): on Redis 8\.2 or later, grant the user \+command\|info \+command\|docs/,
    );
  });

  it('newerCommands: false is refused with deleteOnAck (the option needs XACKDEL)', async () => {
    await expect(start(options(uniquePrefix(), { newerCommands: false }))).rejects.toThrow(
      "nestjs-redis-streams: unsupported server: deleteOnAck: 'this-group' needs XACKDEL (Redis 8.2 or later), which newerCommands: false turns off",
    );
  });
});
