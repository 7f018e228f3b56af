// A pattern's rate limit as the dashboard shows it (issue 51, item 3): the limit its workers publish, the window's
// use, the block, the keys a per-key limit holds back, and a limit no worker runs any more disappearing.
import type { Server } from 'node:http';
import { Redis } from 'ioredis';
import { RateLimitedException, serveDashboard } from 'nestjs-redis-streams';
import { RateLimitedError } from 'nestjs-redis-streams/core';
import { aclUser } from './support/acl.js';
import { useBrowser } from './support/browser.js';
import { CORE_HOST, startApp, uniquePrefix, type TestApp } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';
import { redisNow } from './support/redis-clock.js';
import { heldKeyMemberOf, rateLimitKeysOf, rateLimitStateKeysOf } from '../libs/redis-streams/src/key-names.js';
import { RateStateCommands } from '../libs/redis-streams/src/redis/tools/rate-state-commands.js';

const redis = useRedis();
const browser = useBrowser();
const apps: TestApp[] = [];
const servers: Server[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
  clients.splice(0).forEach((c) => c.disconnect());
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => (s.close(resolve), s.closeAllConnections()))));
});

const rateLimited = (ms: number): Error => (CORE_HOST ? new RateLimitedError(ms) : new RateLimitedException(ms));

async function worker(prefix: string, extras: Record<string, unknown>, options: Record<string, unknown> = {}): Promise<TestApp> {
  const app = await startApp(
    {
      connection: redis.connection,
      group: 'g',
      consumer: 'w1',
      keyPrefix: prefix,
      blockMs: 200,
      minIdleMs: 5000,
      concurrency: 4,
      ...options,
    },
    { handlers: [{ pattern: 'mail', extras }] },
  );
  apps.push(app);
  return app;
}

async function dashboard(prefix: string) {
  const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*` });
  servers.push(server);
  return {
    url,
    limit: async (stream: string, group = 'g') => {
      const res = await fetch(`${url}api/rate-limit?key=${encodeURIComponent(stream)}&group=${encodeURIComponent(group)}`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { limit: any }).limit;
    },
  };
}

describe("a pattern's rate limit on the dashboard", () => {
  it('under load: the limit, the window in use (as Redis holds it) and the block a RateLimitedException set, on the API and on the stream page', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const tx = redis.client().multi();
    for (let n = 0; n < 20; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n }));
    await tx.exec();
    // A long window: the 5 grants it holds stay there while the test looks.
    const app = await worker(prefix, { rateLimit: { max: 5, perMs: 60_000 } });
    let thrown = false;
    app.recorder.behavior = () => {
      if (thrown) return undefined;
      thrown = true;
      throw rateLimited(30_000);
    };
    const { window, block } = rateLimitKeysOf(stream, 'g', redis.cluster);
    await waitFor(async () => (await redis.client().pttl(block)) > 0 && (await redis.client().zcard(window)) === 5, {
      message: 'the window full and the pattern blocked',
    });
    const d = await dashboard(prefix);
    const limit = await d.limit(stream);
    expect(limit.name).toBe(stream);
    expect(limit.state).toMatchObject({ max: 5, perMs: 60_000, perKey: false, windowUsed: 5, blockedBy: 'w1', held: [], heldCount: 0 });
    expect(limit.state.blockedForMs).toBeGreaterThan(0);
    expect(limit.state.blockedForMs).toBeLessThanOrEqual(30_000);
    // The record lives as long as the lease: renewed by the workers that run the limit.
    expect(limit.state.recordTtlMs).toBeGreaterThan(0);
    expect(limit.state.recordTtlMs).toBeLessThanOrEqual(5000);
    // A group that has no such limit: none.
    expect(await d.limit(stream, 'other')).toBeNull();
    // The group is required, and bounded.
    const refused = await fetch(`${d.url}api/rate-limit?key=${encodeURIComponent(stream)}`);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toBe('"group" is required');
    const long = await fetch(`${d.url}api/rate-limit?key=${encodeURIComponent(stream)}&group=${'g'.repeat(1001)}`);
    expect(long.status).toBe(400);

    const page = await browser.page();
    await page.goto(`${d.url}#/stream/${encodeURIComponent(stream)}`);
    const card = page.getByRole('region', { name: 'Rate limit of group g: 5 per 60 s' });
    await card.waitFor();
    expect(await card.locator('[data-rate="window"]').textContent()).toBe('window 5 / 5 used');
    expect(await card.locator('[data-rate="blocked"]').textContent()).toMatch(/^Blocked for .+ more \(by w1\)$/);
    await browser.shot(page, 'rate-limit-pattern');
  });

  it('per key: the keys held back now, held longest first, named as written (a key with ":" too), on the API and on the stream page', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const tenants = ['t0', 't1', 'a:b'];
    const tx = redis.client().multi();
    for (let n = 0; n < 9; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n, tenant: tenants[n % 3] }));
    await tx.exec();
    const app = await worker(prefix, { rateLimit: { max: 1, perMs: 60_000, perKey: (p: { tenant: string }) => p.tenant } });
    await waitFor(() => app.recorder.calls.length === 3, { message: 'one entry of each key handled' });
    const { held } = rateLimitStateKeysOf(stream, 'g', redis.cluster);
    await waitFor(async () => (await redis.client().zcard(held)) === 3, { message: 'three keys held back' });
    const d = await dashboard(prefix);
    const limit = await d.limit(stream);
    expect(limit.state).toMatchObject({ max: 1, perMs: 60_000, perKey: true, heldCount: 3, blockedForMs: 0 });
    expect(limit.state.held.map((h: { key: string }) => h.key).sort()).toEqual(tenants.map(heldKeyMemberOf).sort());
    for (const h of limit.state.held) expect(h.forMs).toBeGreaterThan(0);
    // At most a window (and its 1 ms edge) from the refusal on.
    for (const h of limit.state.held) expect(h.forMs).toBeLessThanOrEqual(60_001);
    // Held longest first.
    const forMs = limit.state.held.map((h: { forMs: number }) => h.forMs);
    expect(forMs).toEqual([...forMs].sort((a, b) => b - a));

    const page = await browser.page();
    await page.goto(`${d.url}#/stream/${encodeURIComponent(stream)}`);
    const card = page.getByRole('region', { name: 'Rate limit of group g: 1 per 60 s per key' });
    await card.waitFor();
    expect(await card.locator('[data-rate="held"]').textContent()).toBe('3 keys held back now');
    const keys = await card.getByRole('table').locator('tbody tr td:first-child').allTextContents();
    expect(keys.sort()).toEqual([...tenants].sort());
    await browser.shot(page, 'rate-limit-per-key');
  });

  it('a limit no worker runs any more disappears after its TTL (the lease, minIdleMs), held keys with it', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const tx = redis.client().multi();
    for (let n = 0; n < 4; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n, tenant: 't' }));
    await tx.exec();
    const limited = await worker(
      prefix,
      { rateLimit: { max: 1, perMs: 60_000, perKey: (p: { tenant: string }) => p.tenant } },
      { minIdleMs: 1500 },
    );
    const { record, held } = rateLimitStateKeysOf(stream, 'g', redis.cluster);
    await waitFor(async () => (await redis.client().exists(record, held)) === 2, { message: 'the limit published and a key held' });
    const d = await dashboard(prefix);
    expect((await d.limit(stream)).state.perKey).toBe(true);
    // Renewed while it runs: past the TTL it had, on Redis' clock, it is still there.
    const [at, ttl] = [await redisNow(redis.client()), await redis.client().pttl(record)];
    await waitFor(async () => (await redisNow(redis.client())) > at + ttl + 200, { message: 'its first TTL past' });
    expect(await redis.client().exists(record)).toBe(1);
    // The deploy that removes the limit: the same pattern and group, without it.
    apps.splice(apps.indexOf(limited), 1);
    await limited.close();
    await worker(prefix, {}, { minIdleMs: 1500 });
    await waitFor(async () => (await d.limit(stream)) === null, { message: 'the limit gone from the dashboard', timeoutMs: 10_000 });
    expect(await redis.client().exists(record, held)).toBe(0);
  });

  it('the dashboard reads it with the read-only rights docs/guide/security.md names', async (ctx) => {
    if (redis.cluster) ctx.skip(); // the ACL tests run on one node
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n: 0, tenant: 't' }));
    await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n: 1, tenant: 't' }));
    await worker(prefix, { rateLimit: { max: 1, perMs: 60_000, perKey: (p: { tenant: string }) => p.tenant } });
    const { held } = rateLimitStateKeysOf(stream, 'g', false);
    await waitFor(async () => (await redis.client().zcard(held)) === 1, { message: 'a key held' });
    // No +get: a value is read in part (GETRANGE) or once its length is known (HSTRLEN), never whole (review finding).
    const rights = ['+evalsha', '+eval', '+type', '+hstrlen', '+hmget', '+pttl', '+zcount', '+zrevrangebyscore', '+getrange', '+time'];
    const user = await aclUser(redis.client(), redis.port, `rs-${prefix.slice(2, 10)}`, prefix, [
      'on',
      '>pw',
      `~${prefix}*:rate*`,
      '-@all',
      // ioredis' ready check.
      '+info',
      '+ping',
      ...rights,
    ]);
    const limited = new Redis(user);
    clients.push(limited);
    const state = await new RateStateCommands(limited, false).state(stream, 'g');
    expect(state).toMatchObject({ perKey: true, heldCount: 1, held: [{ key: 't' }] });
  });

  it('forged values read within their bounds: a limit that is no whole number reads as none, a huge block value is cut (review finding)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const k = rateLimitStateKeysOf(stream, 'g', redis.cluster);
    const commands = new RateStateCommands(redis.client(), redis.cluster);
    for (const max of ['1e400', 'inf', 'nan', '99999999999999999999', '2.7', '0x10', '-1']) {
      await redis.client().hset(k.record, 'max', max, 'perMs', '1000', 'perKey', '0');
      expect(await commands.state(stream, 'g'), max).toBeNull();
    }
    await redis.client().hset(k.record, 'max', 'x'.repeat(1_000_000), 'perMs', '1000', 'perKey', '0');
    expect(await commands.state(stream, 'g')).toBeNull();
    await redis.client().hset(k.record, 'max', '5', 'perMs', '1000', 'perKey', '0');
    const block = rateLimitKeysOf(stream, 'g', redis.cluster).block;
    await redis.client().set(block, `<b>${'y'.repeat(5_000_000)}`, 'PX', 60_000);
    const state = await commands.state(stream, 'g');
    expect(state).toMatchObject({ max: 5, perMs: 1000 });
    expect(state!.blockedBy!.length).toBeLessThanOrEqual(200);
  });

  it('a dashboard user without rights on the rate keys sees the rest of the stream page, and why the limit is missing', async (ctx) => {
    if (redis.cluster) ctx.skip(); // the ACL tests run on one node
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    await redis.client().xadd(stream, '*', 'data', '{}');
    // A limit as a worker publishes it.
    await redis.client().hset(rateLimitStateKeysOf(stream, 'g', false).record, 'max', 5, 'perMs', 1000, 'perKey', '0');
    // Everything but HMGET, which only the rate-limit read uses: as a user with no rights on the rate keys would be refused.
    const user = await aclUser(redis.client(), redis.port, `rs-${prefix.slice(2, 10)}`, prefix, [
      'on',
      '>pw',
      `~${prefix}*`,
      '+@all',
      '-hmget',
    ]);
    const limited = new Redis(user);
    clients.push(limited);
    const { server, url } = await serveDashboard(limited, { port: 0, match: `${prefix}*` });
    servers.push(server);
    const res = await fetch(`${url}api/rate-limit?key=${encodeURIComponent(stream)}&group=g`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/NOPERM|no permissions|can't run this command/);
    const page = await browser.page();
    await page.goto(`${url}#/stream/${encodeURIComponent(stream)}`);
    await page.getByRole('region', { name: 'Group g' }).waitFor();
    expect(await page.locator('[data-rate="unknown"]').textContent()).toMatch(
      /^Rate limit of group g unknown \(.*(NOPERM|no permissions|can't run this command)/,
    );
  });
});
