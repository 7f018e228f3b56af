import { RateLimitedException } from 'nestjs-redis-streams';
import { RateLimitedError } from 'nestjs-redis-streams/core';
import { captureLogs } from './support/logs.js';
import { CORE_HOST, registered, startApp, TestWorker, uniquePrefix, type TestApp } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { aclUser } from './support/acl.js';
import { startFixture } from './support/fixture-process.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './support/wait-for.js';
import { redisNow } from './support/redis-clock.js';
import { keyRateLimitKeysOf, rateLimitKeysOf } from '../libs/redis-streams/src/key-names.js';

const redis = useRedis();
const { children, dirs } = useLeftoversAfterEach();

const apps: TestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

const rateLimited = (ms: number): Error => (CORE_HOST ? new RateLimitedError(ms) : new RateLimitedException(ms));

async function worker(
  prefix: string,
  consumer: string,
  extras: Record<string, unknown>,
  options = {},
  logger?: ReturnType<typeof captureLogs>['logger'],
): Promise<TestApp> {
  const app = await startApp(
    { connection: redis.connection, group: 'g', consumer, keyPrefix: prefix, blockMs: 200, minIdleMs: 5000, concurrency: 4, ...options },
    { handlers: [{ pattern: 'mail', extras }], ...(logger ? { logger } : {}) },
  );
  apps.push(app);
  return app;
}

const LIMIT = { max: 20, perMs: 500 };
const ENTRIES = 120;

describe('rate limits: at most max entries started per perMs, by the whole group', () => {
  for (const workers of [1, 4]) {
    it(`holds with ${workers} worker(s): ${ENTRIES} waiting entries take at least ${ENTRIES / LIMIT.max - 1} windows, each handled once at its first delivery`, async () => {
      const prefix = uniquePrefix();
      const stream = `${prefix}mail`;
      const tx = redis.client().multi();
      for (let n = 0; n < ENTRIES; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n }));
      await tx.exec();
      const start = await redisNow(redis.client());
      const running: TestApp[] = [];
      for (let w = 0; w < workers; w++) running.push(await worker(prefix, `w${w}`, { rateLimit: LIMIT }));
      const calls = () => running.flatMap((a) => a.recorder.calls);
      await waitFor(() => calls().length >= ENTRIES, { message: `${ENTRIES} handled`, timeoutMs: 30_000 });
      const end = await redisNow(redis.client());
      // The 101st grant comes 5 windows after the first at the earliest (Redis' clock; a busy machine only adds).
      expect(end - start).toBeGreaterThanOrEqual((ENTRIES / LIMIT.max - 1) * LIMIT.perMs);
      expect(new Set(calls().map((c) => c.id)).size).toBe(ENTRIES);
      expect(calls().every((c) => c.deliveryCount === 1)).toBe(true);
      if (workers > 1) expect(running.filter((a) => a.recorder.calls.length > 0).length).toBeGreaterThan(1);
    }, 60_000);
  }

  it('a handler rate limited by its downstream: the entry comes back uncounted (never a dead letter), and the pattern starts nothing meanwhile', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const logs = captureLogs();
    let thrownAt = 0;
    const startedAt = new Map<number, number>();
    const app = await worker(prefix, 'w1', { rateLimit: { max: 1000, perMs: 1000 } }, { maxDeliveries: 1 }, logs.logger);
    app.recorder.behavior = (call) => {
      const { n } = call.payload as { n: number };
      if (!startedAt.has(n)) startedAt.set(n, Date.now());
      if (n === 0 && thrownAt === 0) {
        thrownAt = Date.now();
        throw rateLimited(600);
      }
      return undefined;
    };
    await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n: 0 }));
    const { block } = rateLimitKeysOf(`${prefix}mail`, 'g', redis.cluster);
    await waitFor(async () => (await redis.client().pttl(block)) > 0, { message: 'the pattern blocked' });
    for (let n = 1; n <= 5; n++) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n }));
    await waitFor(() => app.recorder.calls.length === 7, { message: 'entry 0 twice and the 5 others' });
    const calls = app.recorder.calls;
    const zero = calls.filter((c) => (c.payload as { n: number }).n === 0);
    // Its retry is delivery 1 again: on maxDeliveries 1 a counted failure would have been a dead letter.
    expect(zero.map((c) => c.deliveryCount)).toEqual([1, 1]);
    expect(await redis.client().exists(deadLetterKey(stream))).toBe(0);
    // Nothing new started before the block ended (this process' clock: the block began after the throw).
    const others = [1, 2, 3, 4, 5].map((n) => startedAt.get(n)! - thrownAt);
    expect(others.filter((ms) => ms < 590)).toEqual([]);
    expect(logs.lines.some((l) => /was rate limited on entry .*its delivery not counted; "mail" starts nothing for 600 ms/.test(l))).toBe(
      true,
    );
  });

  // CLIENT LIST of one node: one node only.
  it.skipIf(CLUSTER_MODE)(
    'close() while an entry waits for its grant runs that entry (in hand), rather than hand it back counted',
    async () => {
      const prefix = uniquePrefix();
      const stream = `${prefix}mail`;
      const calls: number[] = [];
      // A park of 30 s: it is still parked when the entry comes.
      const c = new TestWorker({
        connection: redis.connection,
        group: 'g',
        consumer: 'w1',
        keyPrefix: prefix,
        logger: false,
        concurrency: 1,
        blockMs: 30_000,
        minIdleMs: 3000,
        maxDeliveries: 1,
      }).handle('mail', (_: unknown, ctx: { getDeliveryCount(): number }) => void calls.push(ctx.getDeliveryCount()), {
        rateLimit: { max: 1, perMs: 20_000 },
      });
      let open = true;
      onTestFinished(() => (open ? c.close() : undefined));
      await c.start();
      const parked = async () =>
        String(await redis.client().call('CLIENT', 'LIST', 'TYPE', 'normal'))
          .split('\n')
          .some((l) => /cmd=xreadgroup/.test(l) && /flags=b/.test(l));
      await waitFor(parked, { message: 'the reader parked (a read for one entry, taken without a grant while the window had room)' });
      // Another worker's grant fills the window (20 s); the entry the park brings waits for one.
      const { window } = rateLimitKeysOf(`${prefix}mail`, 'g', redis.cluster);
      await redis.client().zadd(window, await redisNow(redis.client()), 'other-worker:1');
      await redis.client().xadd(stream, '*', 'data', '{}');
      await waitFor(async () => ((await redis.client().xpending(stream, 'g')) as [number])[0] === 1, {
        message: 'the entry read, waiting',
      });
      expect(calls).toEqual([]);
      await c.close();
      open = false;
      expect(calls).toEqual([1]);
      expect(await redis.client().exists(deadLetterKey(stream))).toBe(0);
    },
  );

  it('a RateLimitedException with no usable delay is an ordinary failure, said so; one of 0 ms blocks nothing; 1.5 ms is rounded, uncounted', async () => {
    const prefix = uniquePrefix();
    const logs = captureLogs();
    const app = await worker(prefix, 'w1', { rateLimit: { max: 100, perMs: 1000 } }, { maxDeliveries: 3, minIdleMs: 1000 }, logs.logger);
    const thrown = new Set<number>();
    app.recorder.behavior = (call) => {
      const { n } = call.payload as { n: number };
      if (thrown.has(n)) return undefined;
      thrown.add(n);
      throw rateLimited(n === 1 ? -5 : n === 2 ? 0 : 1.5);
    };
    for (const n of [1, 2, 3]) await redis.client().xadd(`${prefix}mail`, '*', 'data', JSON.stringify({ n }));
    await waitFor(() => app.recorder.calls.length === 6, { message: 'entry 1 again (counted), entries 2 and 3 again (uncounted)' });
    const byN = (n: number) => app.recorder.calls.filter((c) => (c.payload as { n: number }).n === n).map((c) => c.deliveryCount);
    expect(byN(1)).toEqual([1, 2]);
    expect(byN(2)).toEqual([1, 1]);
    // A fraction of a ms is a delay all the same (a Retry-After in seconds × 1000, a difference of clocks): rounded.
    expect(byN(3)).toEqual([1, 1]);
    expect(logs.lines.some((l) => /RateLimitedException: .*a failure, counted/.test(l))).toBe(true);
    expect(logs.lines.filter((l) => /its delivery not counted/.test(l))).toHaveLength(2);
    expect(logs.lines.some((l) => /rate limited on entry .*: left pending, next try in 2 ms, its delivery not counted/.test(l))).toBe(true);
    expect(logs.lines.filter((l) => /could not slow|starts nothing for 0 ms/.test(l))).toEqual([]);
  });

  for (const workers of [1, 4]) {
    it(`per key, with ${workers} worker(s): a hot key takes its windows, the other keys are not held behind it`, async () => {
      const prefix = uniquePrefix();
      const stream = `${prefix}mail`;
      const HOT = 60;
      const limit = { max: 10, perMs: 500, perKey: true };
      const tx = redis.client().multi();
      // The hot key's backlog first, then a few of each other key behind it in the stream.
      for (let n = 0; n < HOT; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', 'hot');
      for (let n = 0; n < 5; n++) for (const key of ['a', 'b']) tx.xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', key);
      for (let n = 0; n < 3; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n })); // no key: not limited
      await tx.exec();
      const start = await redisNow(redis.client());
      const running: TestApp[] = [];
      // Every worker's starts in one order.
      const order: { fields: Record<string, string> }[] = [];
      for (let w = 0; w < workers; w++) {
        const app = await worker(prefix, `w${w}`, { rateLimit: limit });
        app.recorder.behavior = (call) => void order.push(call);
        running.push(app);
      }
      const calls = () => running.flatMap((a) => a.recorder.calls);
      const keyOf = (c: { fields: Record<string, string> }) => c.fields.partitionKey ?? '-';
      await waitFor(() => calls().length >= HOT + 13, {
        message: 'every entry handled',
        timeoutMs: 30_000,
        progress: () => calls().length,
      });
      const end = await redisNow(redis.client());
      // The hot key's 51st grant comes 5 windows after its first at the earliest (Redis' clock).
      expect(end - start).toBeGreaterThanOrEqual((HOT / limit.max - 1) * limit.perMs);
      expect(new Set(calls().map((c) => c.id)).size).toBe(HOT + 13);
      // Waiting for its key's grant counts no delivery.
      expect(calls().filter((c) => c.deliveryCount !== 1)).toEqual([]);
      // The other keys did not wait behind the hot key: all started before its last window (held behind it, they
      // would start after all 60). Not a tighter bound: how soon they start is the machine's speed (a loaded CI run
      // started them after the hot key's second window, 500 ms windows being real time).
      const hotSeen = order.filter((c) => keyOf(c) === 'hot');
      const lastOther = Math.max(...order.map((c, i) => (keyOf(c) === 'hot' ? -1 : i)));
      expect(lastOther).toBeLessThan(order.indexOf(hotSeen[HOT - limit.max]!));
      expect(await redis.client().exists(deadLetterKey(stream))).toBe(0);
    }, 60_000);
  }

  it('per key with ordered: each key in id order, one at a time, at most max per perMs', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const limit = { max: 4, perMs: 400, perKey: true };
    const app = await worker(prefix, 'w1', { ordered: true, rateLimit: limit });
    const written: Record<string, string[]> = { x: [], y: [] };
    const start = await redisNow(redis.client());
    for (let n = 0; n < 16; n++)
      for (const key of ['x', 'y'])
        written[key]!.push((await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', key)) as string);
    await waitFor(() => app.recorder.calls.length >= 32, {
      message: 'every entry handled',
      timeoutMs: 30_000,
      progress: () => app.recorder.calls.length,
    });
    const end = await redisNow(redis.client());
    for (const key of ['x', 'y'])
      expect(app.recorder.calls.filter((c) => c.fields.partitionKey === key).map((c) => c.id)).toEqual(written[key]);
    expect(end - start).toBeGreaterThanOrEqual((16 / limit.max - 1) * limit.perMs);
    expect(app.recorder.calls.every((c) => c.deliveryCount === 1)).toBe(true);
  }, 60_000);

  it("per key by a function: a RateLimitedException slows that key alone; a key function's bad key fails the entry, said so", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const logs = captureLogs();
    const perKey = (p: { tenant?: unknown; boom?: boolean }) => {
      if (p.boom) throw new Error('boom');
      return p.tenant as string;
    };
    const app = await worker(prefix, 'w1', { rateLimit: { max: 1000, perMs: 1000, perKey } }, { maxDeliveries: 1 }, logs.logger);
    let thrownAt = 0;
    const startedAt = new Map<string, number>();
    app.recorder.behavior = (call) => {
      const { tenant, n } = call.payload as { tenant: string; n: number };
      startedAt.set(`${tenant}/${n}`, Date.now());
      if (tenant === 't1' && n === 0 && thrownAt === 0) {
        thrownAt = Date.now();
        throw rateLimited(700);
      }
      return undefined;
    };
    const add = (payload: object) => redis.client().xadd(stream, '*', 'data', JSON.stringify(payload));
    await add({ tenant: 't1', n: 0 });
    const { block } = keyRateLimitKeysOf(`${prefix}mail`, 'g', 't1', redis.cluster);
    await waitFor(async () => (await redis.client().pttl(block)) > 0, { message: "t1's key blocked" });
    for (let n = 1; n <= 3; n++) {
      await add({ tenant: 't1', n });
      await add({ tenant: 't2', n });
    }
    await add({ tenant: { not: 'a key' }, n: 9 });
    await add({ boom: true, n: 10 });
    await waitFor(() => app.recorder.calls.length === 8 && startedAt.has('t1/3'), { message: 't1 twice at 0, then the others' });
    // t2 went on while t1 waited; t1's later entries started after its block (this process' clock, from the throw).
    for (let n = 1; n <= 3; n++) {
      expect(startedAt.get(`t1/${n}`)! - thrownAt).toBeGreaterThanOrEqual(690);
      expect(startedAt.get(`t2/${n}`)!).toBeLessThan(startedAt.get(`t1/1`)!);
    }
    expect(app.recorder.calls.filter((c) => (c.payload as { tenant: string }).tenant === 't1').map((c) => c.deliveryCount)).toEqual([
      1, 1, 1, 1, 1,
    ]);
    expect(logs.lines.some((l) => /its delivery not counted; key "t1" of "mail" starts nothing for 700 ms/.test(l))).toBe(true);
    // The bad key and the key function that threw: failures of their entries (the handler never ran), on
    // maxDeliveries 1 dead letters naming why.
    await waitFor(async () => (await redis.client().xlen(deadLetterKey(stream))) === 2, { message: 'both dead-lettered' });
    const letters = (await redis.client().xrange(deadLetterKey(stream), '-', '+')).map(([, f]) => f.join(' '));
    expect(letters.some((l) => /rateLimit.perKey returned object: a key is a string or a finite number/.test(l))).toBe(true);
    expect(letters.some((l) => /rateLimit.perKey threw: Error: boom/.test(l))).toBe(true);
  }, 60_000);

  it('per key: a key of any length and characters has its own window (escaped, or hashed)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    // A function's key: the payload's JSON can hold a lone surrogate, a field's bytes cannot.
    const app = await worker(prefix, 'w1', { rateLimit: { max: 1, perMs: 60_000, perKey: (p: { k: string }) => p.k } });
    const keys = ['a:b}{c', 'x'.repeat(5000), '\ud800 lone', 'a%3Ab%7D%7Bc'];
    for (const k of keys) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ k }));
    await waitFor(() => app.recorder.calls.length === keys.length, { message: 'each key its first entry' });
    const names = keys.map((k) => keyRateLimitKeysOf(`${prefix}mail`, 'g', k, redis.cluster).window);
    expect(new Set(names).size).toBe(keys.length);
    // Nor a pattern's window of a group whose name looks like a key's (review finding).
    expect(keyRateLimitKeysOf(`${prefix}mail`, 'g', 'x', redis.cluster).window).not.toBe(
      rateLimitKeysOf(`${prefix}mail`, 'g:key:x', redis.cluster).window,
    );
    for (const name of names) expect(await redis.client().zcard(name)).toBe(1);
    expect(Math.max(...names.map((n) => n.length))).toBeLessThan(prefix.length + 120);
  });

  it("ordered, per key: kill -9 of the worker while a key's backlog waits for its turns; its restart handles every entry, none dead-lettered on maxDeliveries 1 (review finding)", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}reminders`;
    const dir = mkdtempSync(join(tmpdir(), 'rate-'));
    dirs.push(dir);
    const log = join(dir, 'handled.log');
    const handled = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0);
    const conn = JSON.stringify(redis.connection);
    const start = () =>
      startFixture(children, 'flow-worker.mjs', [
        conn,
        prefix,
        'w1',
        log,
        JSON.stringify({ maxDeliveries: 1, minIdleMs: 1000, leaseRenewMs: 200 }),
        JSON.stringify({ ordered: true, rateLimit: { max: 3, perMs: 5000, perKey: true } }),
      ]);
    const tx = redis.client().multi();
    for (let n = 0; n < 16; n++) tx.xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', `k${n % 2}`);
    await tx.exec();
    // Every pending entry at delivery count 0: each key's first window handled, the rest read and waiting for their
    // turns, their counts put back. Nothing runs then (the windows are full for 5 s), so the kill lands on no handler.
    const quiet = async (waiting: number) => {
      const pending = (await redis.client().xpending(stream, 'g', '-', '+', 100)) as [string, string, number, number][];
      return pending.length === waiting && pending.every(([, , , count]) => count === 0);
    };
    const first = await start();
    await waitFor(async () => handled() === 6 && (await quiet(10)), { message: '6 handled, 10 waiting uncounted', timeoutMs: 30_000 });
    first.child.kill('SIGKILL');
    await new Promise((resolve) =>
      first.child.exitCode !== null || first.child.signalCode !== null ? resolve(0) : first.child.once('exit', resolve),
    );
    const second = await start();
    await waitFor(() => handled() >= 16, { message: 'every entry handled', timeoutMs: 60_000, progress: handled }).catch(
      async (err: unknown) => {
        // Seen once in CI (2026-12-06, a loaded machine: stuck at 12 for 60 s), not since: what the group held then.
        const pending = await redis.client().xpending(stream, 'g', '-', '+', 100);
        const output = `${second.out().slice(-3000)} (exit ${String(second.child.exitCode ?? second.child.signalCode)})`;
        throw new Error(
          `${String(err)}\npending (id, consumer, idle ms, deliveries): ${JSON.stringify(pending)}\nworker output: ${output}`,
          {
            cause: err,
          },
        );
      },
    );
    expect(await redis.client().exists(deadLetterKey(stream))).toBe(0);
  }, 90_000);

  it('a RateLimitedException with an invalid delay is an ordinary, counted failure: dead-lettered after maxDeliveries, not tried forever (review finding)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}mail`;
    const app = await worker(prefix, 'w1', {}, { maxDeliveries: 3, retry: { backoff: { type: 'fixed', delayMs: 20 } } });
    app.recorder.behavior = () => {
      throw rateLimited(-1);
    };
    await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n: 1 }));
    await waitFor(async () => (await redis.client().xlen(deadLetterKey(stream))) === 1, { message: 'dead-lettered', timeoutMs: 15_000 });
    expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 2, 3]);
  });

  // An ACL on one node.
  it.skipIf(CLUSTER_MODE)(
    'per key, a Redis that refuses the grants script: the entries wait uncounted (no dead letter on maxDeliveries 1), one error names the rights, and they run once granted (review finding)',
    async () => {
      const prefix = uniquePrefix();
      const stream = `${prefix}mail`;
      const logs = captureLogs();
      const name = `rl-${prefix.slice(2, 10)}`;
      const user = await aclUser(redis.client(), redis.port, name, prefix, ['on', '>pw', '~*', '&*', '+@all', '-zcard']);
      const app = await worker(
        prefix,
        'w1',
        { rateLimit: { max: 10, perMs: 200, perKey: true } },
        { connection: user, maxDeliveries: 1 },
        logs.logger,
      );
      for (let n = 0; n < 3; n++) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n }), 'partitionKey', `k${n}`);
      await waitFor(() => logs.lines.some((l) => /could not take a grant of the rate limit of key "k\d" of "mail": ERR/.test(l)), {
        message: 'the refusal logged, naming the limit',
      });
      // Each put back uncounted (delivery count 0 while it waits), not counted again by a restart.
      await waitFor(
        async () => {
          const pending = (await redis.client().xpending(stream, 'g', '-', '+', 10)) as [string, string, number, number][];
          return pending.length === 3 && pending.every(([, , , count]) => count === 0);
        },
        { message: 'all three waiting uncounted' },
      );
      expect(logs.lines.filter((l) => /could not take a grant/.test(l))).toHaveLength(1);
      expect(logs.lines.find((l) => /could not take a grant/.test(l))).toMatch(/\+zadd .*~.*rate/);
      await redis.client().call('ACL', 'SETUSER', name, '+zcard');
      await waitFor(() => app.recorder.calls.length === 3, { message: 'all three handled once granted' });
      expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 1, 1]);
      expect(await redis.client().exists(deadLetterKey(stream))).toBe(0);
    },
  );

  it('refuses a wrong rateLimit, naming it', () => {
    const extras =
      (rateLimit: unknown, more: object = {}) =>
      () =>
        new TestWorker({ connection: redis.connection, logger: false }).handle('mail', () => undefined, { rateLimit, ...more }).start();
    const named = registered('mail').replace(/[()]/g, '\\$&');
    return Promise.all([
      expect(extras({ max: 0, perMs: 1000 })()).rejects.toThrow(
        new RegExp(`"${named} rateLimit.max": must be a whole number from 1 to 100000, got 0`),
      ),
      expect(extras({ max: 5, perMs: 1.5 })()).rejects.toThrow(/rateLimit.perMs": must be a whole number/),
      expect(extras({ max: 5, per: 1000 })()).rejects.toThrow(/rateLimit.per": unknown option/),
      expect(extras(5)()).rejects.toThrow(/rateLimit": must be \{ max, perMs \}/),
      expect(extras({ max: 5, perMs: 1000 }, { ordered: true })()).rejects.toThrow(
        /a pattern's rateLimit with ordered is not supported yet; a limit per key \(rateLimit.perKey\) is/,
      ),
      expect(extras({ max: 5, perMs: 1000, perKey: 'tenant' })()).rejects.toThrow(
        /rateLimit.perKey": must be true \(the partition key\) or a function \(payload, headers\) => key, got "tenant"/,
      ),
      expect(extras({ max: 5, perMs: 1000, perKey: true }, { batch: { maxSize: 10 } })()).rejects.toThrow(
        /rateLimit with batch is not supported yet/,
      ),
    ]);
  });
});
