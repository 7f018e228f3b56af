import type { RedisStreamsServerOptions } from 'nestjs-redis-streams';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { CLUSTER_MODE, retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { deadLetter, retryLater, uniquePrefix, useApps, type Call } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/** When this delivery began, on the server's clock: Redis' TIME minus the entry's idle time (XPENDING). */
async function deliveredAt(key: string, group: string, id: string): Promise<number> {
  const r = redis.client();
  const [[, , idle]] = (await r.xpending(key, group, id, id, 1)) as [[string, string, number, number]];
  const [s, us] = (await r.time()) as unknown as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000) - idle;
}

interface Try {
  call: Call;
  /** Server ms when its delivery began. */
  at: number;
  /** Server ms its retry was due, read from the retry set after it failed (undefined for the last). */
  due?: number;
}

/** Records every try of the handler with its server-side delivery time; `fail(call)` says whether it throws (and what). */
function recordTries(app: Awaited<ReturnType<typeof start>>, group: string, fail: (call: Call) => unknown, tries: Try[] = []): Try[] {
  app.recorder.behavior = async (call) => {
    const t: Try = { call, at: await deliveredAt(call.stream, group, call.id) };
    tries.push(t);
    const error = fail(call);
    if (error) throw error;
  };
  return tries;
}

/** Reads each failure's due time from the retry set before its retry takes the record away. */
function watchDue(key: string, group: string, tries: Try[]): () => void {
  const r = redis.client();
  let on = true;
  void (async () => {
    while (on) {
      const t = tries.at(-1);
      if (t && t.due === undefined) {
        const score = await r.zscore(retrySetKey(key, group), t.call.id);
        if (score !== null) t.due = Number(score);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return () => (on = false);
}

/**
 * The park's length: a retry that waited for the park to end would be about this late (a park that
 * ignores the due time, a mutant of parker.ts: 19.8 s late). A quarter of it is the bound on
 * lateness: ten times what a busy machine was seen to need (CI once saw 368 ms), a fourth of the defect.
 */
/**
 * Runs `test` on a prefix of its own as `<label>-<id>`, an ACL user with README's minimal consumer rules over
 * that prefix (`connection`: its login), deleted afterwards.
 */
async function underMinimalAcl(
  label: string,
  test: (prefix: string, connection: Awaited<ReturnType<typeof aclUser>>) => Promise<void>,
): Promise<void> {
  const prefix = uniquePrefix();
  const name = `${label}-${prefix.slice(2, 10)}`;
  const connection = await aclUser(redis.client(), redis.port, name, prefix, CONSUMER_ACL);
  try {
    await test(prefix, connection);
  } finally {
    await redis.client().call('ACL', 'DELUSER', name);
  }
}

const BLOCK_MS = 20_000;

const base = (prefix: string): RedisStreamsServerOptions => ({
  connection: redis.connection,
  group: 'g',
  keyPrefix: prefix,
  blockMs: BLOCK_MS,
  // Far above every delay here: a retry on time cannot be the idle-time reclaim.
  minIdleMs: 60_000,
});

describe('retries with backoff', () => {
  it('exponential 200 ms: the same entry (id, fields) is tried again at 200, 400, 800 ms after each failure, its count up by one per try, on time on the server clock', async () => {
    const prefix = uniquePrefix();
    const app = await start({ ...base(prefix), retry: { backoff: { type: 'exponential', delayMs: 200 } } });
    const key = app.key();
    const tries = recordTries(app, 'g', (call) => (call.deliveryCount <= 3 ? new Error(`try ${call.deliveryCount} fails`) : undefined));
    const stop = watchDue(key, 'g', tries);
    const id = await redis.client().xadd(key, '*', 'data', '{"order":1}', 'extra', 'kept');
    // A generous deadline: the defect (each retry a park late) makes this fail on the lateness below.
    await waitFor(() => app.settled.some((e) => e.outcome === 'acked'), { message: 'the fourth try to succeed', timeoutMs: 4 * BLOCK_MS });
    stop();
    expect(tries.map((t) => t.call.id)).toEqual([id, id, id, id]);
    expect(tries.map((t) => t.call.deliveryCount)).toEqual([1, 2, 3, 4]);
    expect(tries.map((t) => t.call.fields)).toEqual(tries.map(() => ({ data: '{"order":1}', extra: 'kept' })));
    expect(app.settled.map((e) => [e.outcome, e.retryInMs])).toEqual([
      ['failed', 200],
      ['failed', 400],
      ['failed', 800],
      ['acked', undefined],
    ]);
    const delays = [200, 400, 800];
    for (let i = 0; i < 3; i++) {
      const due = tries[i]!.due!;
      // Due the delay after the failure (which follows the delivery by the handler's time), and tried then.
      expect(due - tries[i]!.at).toBeGreaterThanOrEqual(delays[i]!);
      const late = tries[i + 1]!.at - due;
      expect(late, `try ${i + 2}: ${late} ms after its due time`).toBeGreaterThanOrEqual(0);
      // Tried at its due time, not when the park ends (and the idle-time path takes a minute): see BLOCK_MS.
      // Promptness itself is `npm run bench`'s to measure, on a quiet machine (within max(50 ms, 5 %)).
      expect(late, `try ${i + 2}: ${late} ms after its due time`).toBeLessThan(BLOCK_MS / 4);
    }
    // One entry in the stream, nothing pending, no record left.
    expect(await redis.client().xlen(key)).toBe(1);
    expect(await redis.client().xpending(key, 'g', '-', '+', 10)).toEqual([]);
    expect(await redis.client().zcard(retrySetKey(key, 'g'))).toBe(0);
  }, 120_000);

  it('a delay longer than minIdleMs: the entry stays with its consumer (no peer takes it early), and is tried at its due time', async () => {
    const prefix = uniquePrefix();
    const options = {
      ...base(prefix),
      blockMs: 100,
      // The waiting entry's idle time is reset once it reaches minIdleMs - leaseRenewMs, checked every
      // leaseRenewMs / 2: a check later than that lets the peer take it. With 600 / 150 that was 75 ms of
      // a busy machine's lag; with 1200 / 1000 it is 500 ms.
      minIdleMs: 1200,
      leaseRenewMs: 1000,
      retry: { backoff: { type: 'fixed', delayMs: 2000 } },
    } as const;
    const a = await start({ ...options, consumer: 'a' });
    const b = await start({ ...options, consumer: 'b' });
    const key = a.key();
    const tries: Try[] = [];
    for (const app of [a, b]) recordTries(app, 'g', (call) => (call.deliveryCount === 1 ? new Error('downstream down') : undefined), tries);
    const stop = watchDue(key, 'g', tries);
    await redis.client().xadd(key, '*', 'data', '1');
    await waitFor(() => [...a.settled, ...b.settled].some((e) => e.outcome === 'acked'), { message: 'the retry to succeed' });
    stop();
    expect(tries.map((t) => t.call.deliveryCount)).toEqual([1, 2]);
    // Retried by the consumer that failed it: its peer's reclaim (every 100 ms, past minIdleMs idle) never took it.
    expect(tries[1]!.call.consumer).toBe(tries[0]!.call.consumer);
    const late = tries[1]!.at - tries[0]!.due!;
    expect(late).toBeGreaterThanOrEqual(0);
    // At its due time, not a whole delay later (a schedule counted twice); within that, a busy machine's lag.
    expect(late).toBeLessThan(options.retry.backoff.delayMs);
    expect([...a.settled, ...b.settled].filter((e) => e.source === 'reclaim' && e.outcome !== 'acked')).toEqual([]);
  });

  it('RetryLaterException(ms) sets this one delay over the policy; DeadLetterException still dead-letters at once', async () => {
    const prefix = uniquePrefix();
    const app = await start({ ...base(prefix), retry: { backoff: { type: 'fixed', delayMs: 50_000 } } });
    const key = app.key();
    const r = redis.client();
    const tries = recordTries(app, 'g', (call) =>
      call.payload === 'later' && call.deliveryCount === 1 ? retryLater(300) : call.payload === 'never' ? deadLetter('refused') : undefined,
    );
    const stop = watchDue(key, 'g', tries);
    const later = await r.xadd(key, '*', 'data', '"later"');
    await waitFor(() => app.settled.filter((e) => e.id === later).length === 2, {
      message: 'the retry of "later"',
      timeoutMs: 2 * BLOCK_MS,
    });
    stop();
    expect(app.settled.filter((e) => e.id === later).map((e) => [e.outcome, e.retryInMs])).toEqual([
      ['failed', 300],
      ['acked', undefined],
    ]);
    const late = tries[1]!.at - tries[0]!.due!;
    expect(late).toBeGreaterThanOrEqual(0);
    // Tried at its due time, not when the park ends (see BLOCK_MS).
    expect(late).toBeLessThan(BLOCK_MS / 4);
    const never = await r.xadd(key, '*', 'data', '"never"');
    await waitFor(() => app.settled.some((e) => e.id === never), { message: '"never" to be settled' });
    expect(app.settled.find((e) => e.id === never)!.outcome).toBe('dead-lettered');
  }, 60_000);

  it('a failure on the last delivery is dead-lettered, not scheduled; the log line of a failure says which delivery of how many and when the next try is', async () => {
    const prefix = uniquePrefix();
    const lines: string[] = [];
    const logger = { log: () => {}, warn: () => {}, debug: () => {}, verbose: () => {}, error: (m: unknown) => lines.push(String(m)) };
    const app = await start({ ...base(prefix), maxDeliveries: 2, retry: { backoff: { type: 'fixed', delayMs: 100 } } }, { logger });
    const key = app.key();
    app.recorder.behavior = () => {
      throw new Error('card declined');
    };
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => app.settled.length === 2, { message: 'two tries' });
    expect(app.settled.map((e) => [e.outcome, e.deliveryCount, e.retryInMs])).toEqual([
      ['failed', 1, 100],
      ['dead-lettered', 2, undefined],
    ]);
    expect(lines.find((l) => l.includes(`failed on entry ${id}`))).toMatch(
      /\(delivery 1 of 2\): Error: card declined; left pending, next try in 100 ms$/,
    );
    expect(await redis.client().zcard(retrySetKey(key, 'g'))).toBe(0);
  });

  it.skipIf(CLUSTER_MODE)(
    "under README's minimal ACL: a retry is recorded, claimed at its due time, and a restart adopts the one still waiting",
    () =>
      underMinimalAcl('retry', async (prefix, connection) => {
        const admin = redis.client();
        const options = { ...base(prefix), connection, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 200 } } } as const;
        const app = await start(options);
        app.recorder.behavior = (call) => {
          // "slow" waits a minute: still waiting when its consumer restarts.
          if (call.deliveryCount === 1) throw call.payload === 'slow' ? retryLater(60_000) : new Error('first try fails');
        };
        const key = app.key();
        const quick = await admin.xadd(key, '*', 'data', '"quick"');
        const slow = (await admin.xadd(key, '*', 'data', '"slow"'))!;
        await waitFor(() => app.settled.filter((e) => e.id === quick).length === 2 && app.settled.some((e) => e.id === slow), {
          message: '"quick" retried and "slow" failed',
        });
        expect(app.settled.find((e) => e.id === quick && e.outcome === 'acked')?.deliveryCount).toBe(2);
        await app.close();
        const lines: string[] = [];
        const keep = (m: unknown) => lines.push(String(m));
        const again = await start(options, { logger: { log: keep, warn: keep, error: keep, debug: () => {}, verbose: () => {} } });
        await waitFor(() => lines.some((l) => /1 of 1 entries taken from .* wait for a retry not yet due/.test(l)), {
          message: 'the restart to find "slow" waiting',
        });
        // Kept waiting with the count of its one try, its record still there.
        expect((await admin.xpending(key, 'g', slow, slow, 1))[0]).toEqual([slow, 'a', expect.any(Number), 1]);
        expect(await admin.zscore(retrySetKey(key, 'g'), slow)).not.toBeNull();
        expect(again.settled).toEqual([]);
      }),
  );

  it.skipIf(CLUSTER_MODE)(
    "under README's minimal ACL, without a policy: a failed entry comes back once idle, and the loop never fails on the audit",
    () =>
      underMinimalAcl('owed', async (prefix, connection) => {
        const admin = redis.client();
        const lines: string[] = [];
        const keep = (m: unknown) => lines.push(String(m));
        const app = await start(
          { ...base(prefix), connection, blockMs: 100, minIdleMs: 600, leaseRenewMs: 150 },
          { logger: { log: () => {}, warn: keep, error: keep, debug: () => {}, verbose: () => {} } },
        );
        app.recorder.behavior = (call) => {
          if (call.deliveryCount === 1) throw new Error('first try fails');
        };
        await admin.xadd(app.key(), '*', 'data', '1');
        await waitFor(() => app.settled.some((e) => e.outcome === 'acked'), { message: 'the retry to succeed' });
        expect(app.settled.map((e) => [e.outcome, e.deliveryCount])).toEqual([
          ['failed', 1],
          ['acked', 2],
        ]);
        expect(lines.filter((l) => /consumer loop|check of owed entries failed|NOPERM|can't run this command/.test(l))).toEqual([]);
      }),
  );
});
