import type { ChildProcess } from 'node:child_process';
import { requireBuilt } from './support/built.js';
import { startFixture } from './support/fixture-process.js';
import { CLUSTER_MODE, retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { TEST_HOST, uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** Redis' clock, in ms. */
async function serverNow(): Promise<number> {
  const [s, us] = (await redis.client().time()) as unknown as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** A worker process (test/fixtures/retry-worker.mjs, on the test's host) that fails each entry's first try and retries after `delayMs`. */
async function startWorker(
  prefix: string,
  consumer: string,
  delayMs: number,
  minIdleMs: number,
): Promise<{ child: ChildProcess; out: () => string }> {
  requireBuilt(TEST_HOST === 'core' ? 'libs/redis-streams/dist/esm/core/index.js' : 'libs/redis-streams/dist/esm/index.js');
  return startFixture(children, 'retry-worker.mjs', [
    JSON.stringify(redis.connection),
    prefix,
    consumer,
    String(delayMs),
    String(minIdleMs),
    TEST_HOST,
  ]);
}

/** Consumer `consumer` of group `g` on `prefix` (blockMs 100) in this process, `options` over those. */
const startConsumer = (prefix: string, consumer: string, options: Partial<Parameters<typeof start>[0]>) =>
  start({ connection: redis.connection, group: 'g', consumer, keyPrefix: prefix, blockMs: 100, ...options });

async function killed(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** The peer's tries, each with Redis' time when it began. */
function timedTries(app: TestApp): { count: number; consumer: string; at: number }[] {
  const tries: { count: number; consumer: string; at: number }[] = [];
  app.recorder.behavior = async (call) => {
    tries.push({ count: call.deliveryCount, consumer: call.consumer, at: await serverNow() });
  };
  return tries;
}

/** The first try of an entry by `app` (just started), and Redis' time when `app` was ready. */
async function firstTry(app: TestApp, message: string): Promise<{ count: number; consumer: string; at: number; ready: number }> {
  const tries = timedTries(app);
  const ready = await serverNow();
  await waitFor(() => tries.length === 1, { message, timeoutMs: 20_000 });
  return { ...tries[0]!, ready };
}

/**
 * A worker process `a` whose first try of a new entry fails (retry after `delayMs`), SIGKILLed once the
 * retry is recorded: the entry's id and its due time (its score in the retry set).
 */
async function crashWhileWaiting(prefix: string, delayMs: number, minIdleMs: number): Promise<{ key: string; id: string; due: number }> {
  const key = `${prefix}orders`;
  const worker = await startWorker(prefix, 'a', delayMs, minIdleMs);
  const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
  await waitFor(() => worker.out().includes(`try ${id} 1\n`), { message: 'the first try' });
  await waitFor(async () => (await redis.client().zscore(retrySetKey(key, 'g'), id)) !== null, { message: 'its retry to be recorded' });
  const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
  await killed(worker.child);
  return { key, id, due };
}

describe(`retries survive a crash${CLUSTER_MODE ? ', on a Redis Cluster' : ''}`, () => {
  it('SIGKILL while an entry waits (delay 2500 ms, minIdleMs 1200): a peer takes it once idle, keeps it waiting and tries it at its due time, its count that of a second delivery', async () => {
    const prefix = uniquePrefix();
    const { key, due } = await crashWhileWaiting(prefix, 2500, 1200);
    const peer = await startConsumer(prefix, 'b', {
      // It keeps the entry waiting by resetting its idle time once past minIdleMs - leaseRenewMs, checked
      // every leaseRenewMs / 2: 500 ms of slack for a busy machine (800 / 200 left 100 ms), or its own
      // reclaim takes it again (a third delivery).
      minIdleMs: 1200,
      leaseRenewMs: 1000,
    });
    const first = await firstTry(peer, 'the peer to try it');
    expect(first.consumer).toBe('b');
    expect(first.count).toBe(2);
    // Not before its due time, although the peer held it from ~minIdleMs idle on; and no later than due + minIdleMs
    // (or than the peer's start + minIdleMs, if starting it took past the due time on a busy machine).
    expect(first.at).toBeGreaterThanOrEqual(due);
    expect(first.at - Math.max(due, first.ready)).toBeLessThan(1200);
    await waitFor(() => peer.settled.some((e) => e.outcome === 'acked'), { message: 'the ack' });
    expect(peer.settled.map((e) => e.outcome)).toEqual(['acked']);
    expect(await redis.client().xpending(key, 'g', '-', '+', 10)).toEqual([]);
  });

  it('SIGKILL, then a restart under the same name: self-drain finds the entry waiting and tries it at its due time, not at once', async () => {
    const prefix = uniquePrefix();
    const { due } = await crashWhileWaiting(prefix, 2000, 60_000);
    const again = await startConsumer(prefix, 'a', { minIdleMs: 60_000 });
    const first = await firstTry(again, 'the restarted worker to try it');
    expect(first.count).toBe(2);
    expect(first.at).toBeGreaterThanOrEqual(due);
    // At its due time (its own timer; or at once, if restarting took past it), not minIdleMs (a minute) later:
    // a tenth of it leaves a busy machine ten times what a quiet one needs.
    expect(first.at - Math.max(due, first.ready)).toBeLessThan(60_000 / 10);
  });

  it('a delay shorter than the idle threshold: a peer tries it as soon as it takes it (due passed), count 2, never dead-lettered', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const worker = await startWorker(prefix, 'a', 100, 1000);
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    // Killed after its first failure, before its retry (100 ms later) could run: the try lines say which.
    await waitFor(() => worker.out().includes(`try ${id} 1\n`), { message: 'the first try' });
    await killed(worker.child);
    const retriedThere = worker.out().includes(`try ${id} 2\n`);
    const peer = await startConsumer(prefix, 'b', { minIdleMs: 1000, maxDeliveries: 3 });
    const tries = timedTries(peer);
    await waitFor(() => peer.settled.length === 1, { message: 'the peer to settle it', timeoutMs: 10_000 });
    expect(peer.settled[0]!.outcome).toBe('acked');
    expect(tries[0]!.count).toBe(retriedThere ? 3 : 2);
  });
});

describe('a graceful stop hands waiting entries back for their due time', () => {
  // Each: close() while an entry waits its retry delay, then a peer starts. With minIdleMs 60 s the peer's next
  // reclaim (every blockMs) takes it at its due time (or at once, if starting the peer took past it on a busy
  // machine), not minIdleMs (a minute) later: a tenth of that is the bound. With a delay longer than minIdleMs
  // the peer takes it, keeps it waiting (leaseRenewMs 1000: the slack of the idle resets that do is
  // leaseRenewMs / 2, see the first test) and tries it no later than due (or its start) + minIdleMs.
  it.each([
    [
      'close() while an entry waits (delay 1500 ms, minIdleMs 60 s): a peer tries it at its due time, not a minute later',
      { delayMs: 1500, minIdleMs: 60_000, leaseRenewMs: undefined, boundMs: 60_000 / 10 },
    ],
    [
      'close() while an entry waits longer than minIdleMs (delay 2500 ms, minIdleMs 1200): a peer takes it, keeps it waiting, tries it at its due time',
      { delayMs: 2500, minIdleMs: 1200, leaseRenewMs: 1000, boundMs: 1200 },
    ],
  ])('%s', async (_title, { delayMs, minIdleMs, leaseRenewMs, boundMs }) => {
    const options = { connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100, minIdleMs, leaseRenewMs };
    const a = await start({ ...options, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs } } });
    a.recorder.behavior = () => {
      throw new Error('first try fails');
    };
    const key = a.key();
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => a.settled.length === 1, { message: 'the first try to fail' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    await a.close();
    const peer = await start({ ...options, consumer: 'b' });
    const first = await firstTry(peer, 'the peer to try it');
    expect(first.count).toBe(2);
    expect(first.at).toBeGreaterThanOrEqual(due);
    expect(first.at - Math.max(due, first.ready)).toBeLessThan(boundMs);
  });
});
