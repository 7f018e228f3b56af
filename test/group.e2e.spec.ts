import { RedisStreamsStatus } from 'nestjs-redis-streams';
import type { Redis } from 'ioredis';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();

/** Adds an entry and waits until the app has settled it. */
async function roundTrip(app: TestApp, tag: string): Promise<void> {
  const id = await redis.client().xadd(app.key(), '*', 'tag', tag);
  await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'acked'), { message: `entry ${tag} to be acked` });
}

describe('consumer group behaviour', () => {
  it('two consumers in one group split the work: every entry is handled exactly once', async () => {
    const prefix = uniquePrefix();
    const a = await start({ connection: redis.url, group: 'g', consumer: 'a', keyPrefix: prefix, batchSize: 5, blockMs: 100 });
    const b = await start({ connection: redis.url, group: 'g', consumer: 'b', keyPrefix: prefix, batchSize: 5, blockMs: 100 });
    // A little work per entry so that both consumers get a share.
    for (const app of [a, b]) app.recorder.behavior = () => new Promise((resolve) => setImmediate(resolve));
    const r = redis.client();
    const ids: string[] = [];
    for (let i = 0; i < 400; i++) ids.push((await r.xadd(a.key(), '*', 'n', String(i)))!);
    await waitFor(() => a.settled.length + b.settled.length >= 400, { message: '400 settled entries' });

    const handled = [...a.recorder.idsOf(), ...b.recorder.idsOf()];
    expect(handled.length).toBe(400);
    expect(new Set(handled)).toEqual(new Set(ids));
    expect(a.recorder.calls.length).toBeGreaterThan(0);
    expect(b.recorder.calls.length).toBeGreaterThan(0);
    expect(await r.xpending(a.key(), 'g', '-', '+', 10)).toEqual([]);
  });

  it('re-creates the group after NOGROUP (group destroyed under a running server) without replaying what it already settled', async () => {
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100 });
    for (let i = 0; i < 6; i++) await roundTrip(app, `before-${i}`);
    await redis.client().xgroup('DESTROY', app.key(), 'g');
    await roundTrip(app, 'after');
    // Six settled before, one after: none of the six ran again.
    expect(app.recorder.calls.map((c) => (c.payload as { tag: string }).tag)).toEqual([
      'before-0',
      'before-1',
      'before-2',
      'before-3',
      'before-4',
      'before-5',
      'after',
    ]);
  });

  it('after FLUSHALL reads the new stream from groupStartId, even when its ids are below the ones it saw before', async (ctx) => {
    if (!redis.owned) ctx.skip(); // never flush a server the test does not own
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100 });
    await roundTrip(app, 'before');
    const r = redis.client();
    await r.flushall();
    // A new stream whose ids start far below the old ones (as on a server with a clock behind).
    await r.xadd(app.key(), '1-1', 'tag', 'low');
    await waitFor(() => app.settled.some((e) => e.id === '1-1' && e.outcome === 'acked'), {
      message: 'the low-id entry of the new stream',
    });
    await roundTrip(app, 'after');
    expect(app.recorder.calls.map((c) => (c.payload as { tag: string }).tag)).toEqual(['before', 'low', 'after']);
  });

  it('survives its stream being deleted while parked (UNBLOCKED) and goes on', async () => {
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 30_000 });
    await roundTrip(app, 'before');
    await redis.client().del(app.key());
    await roundTrip(app, 'after');
  });

  it('survives FLUSHALL (the server lost its data) and goes on', async (ctx) => {
    if (!redis.owned) ctx.skip(); // never flush a server the test does not own
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 200 });
    await roundTrip(app, 'before');
    await redis.client().flushall();
    await roundTrip(app, 'after');
  });

  it('reconnects after both connections are killed, reports it through status, and resumes', async () => {
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 200 });
    const statuses: string[] = [];
    app.server.status.subscribe((s) => statuses.push(s));
    await roundTrip(app, 'before');
    // listen() resolves once the groups exist; the blocking lane may still be connecting (a loaded machine).
    await waitFor(() => statuses.at(-1) === RedisStreamsStatus.CONNECTED, { message: 'connected before the kill' });
    const [command, blocking] = app.server.unwrap<[Redis, Redis]>();
    const ids = await Promise.all([command.client('ID'), blocking.client('ID')]);
    // What the kill makes the status say, apart from anything before it.
    const mark = statuses.length;
    const since = () => statuses.slice(mark);
    for (const id of ids) await redis.client().client('KILL', 'ID', String(id));
    await waitFor(() => since().includes(RedisStreamsStatus.RECONNECTING), { message: 'a reconnecting status' });
    await waitFor(() => since().at(-1) === RedisStreamsStatus.CONNECTED, { message: 'connected again' });
    await roundTrip(app, 'after');
    expect(since().at(-1)).toBe(RedisStreamsStatus.CONNECTED);
  });
});

describe('faults the loop rides out', () => {
  it('resumes after the Redis server restarts empty (connection lost, then NOGROUP)', async (ctx) => {
    if (!redis.owned) ctx.skip(); // only a server this file started may be restarted
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 200, retryMaxDelayMs: 200 });
    const statuses: string[] = [];
    app.server.status.subscribe((s) => statuses.push(s));
    await roundTrip(app, 'before');
    await redis.restart();
    await waitFor(() => statuses.includes(RedisStreamsStatus.RECONNECTING), { message: 'the outage to show in status' });
    await roundTrip(app, 'after');
    expect(statuses.at(-1)).toBe(RedisStreamsStatus.CONNECTED);
  });

  it('fails listen() with an error naming the stream when its key holds another type', async () => {
    const prefix = uniquePrefix();
    await redis.client().set(`${prefix}orders`, 'not a stream');
    await expect(start({ connection: redis.url, group: 'g', keyPrefix: prefix })).rejects.toThrow(
      new RegExp(`^WRONGTYPE .*stream "${prefix}orders"`),
    );
  });
});
