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

describe(`retries survive a crash${CLUSTER_MODE ? ', on a Redis Cluster' : ''}`, () => {
  it('SIGKILL while an entry waits (delay 2500 ms, minIdleMs 1200): a peer takes it once idle, keeps it waiting and tries it at its due time, its count that of a second delivery', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const worker = await startWorker(prefix, 'a', 2500, 1200);
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => worker.out().includes(`try ${id} 1\n`), { message: 'the first try' });
    await waitFor(async () => (await redis.client().zscore(retrySetKey(key, 'g'), id)) !== null, { message: 'its retry to be recorded' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    await killed(worker.child);
    const peer = await start({
      connection: redis.connection,
      group: 'g',
      consumer: 'b',
      keyPrefix: prefix,
      blockMs: 100,
      // It keeps the entry waiting by resetting its idle time once past minIdleMs - leaseRenewMs, checked
      // every leaseRenewMs / 2: 500 ms of slack for a busy machine (800 / 200 left 100 ms), or its own
      // reclaim takes it again (a third delivery).
      minIdleMs: 1200,
      leaseRenewMs: 1000,
    });
    const tries = timedTries(peer);
    const ready = await serverNow();
    await waitFor(() => tries.length === 1, { message: 'the peer to try it', timeoutMs: 20_000 });
    expect(tries[0]!.consumer).toBe('b');
    expect(tries[0]!.count).toBe(2);
    // Not before its due time, although the peer held it from ~minIdleMs idle on; and no later than due + minIdleMs
    // (or than the peer's start + minIdleMs, if starting it took past the due time on a busy machine).
    expect(tries[0]!.at).toBeGreaterThanOrEqual(due);
    expect(tries[0]!.at - Math.max(due, ready)).toBeLessThan(1200);
    await waitFor(() => peer.settled.some((e) => e.outcome === 'acked'), { message: 'the ack' });
    expect(peer.settled.map((e) => e.outcome)).toEqual(['acked']);
    expect(await redis.client().xpending(key, 'g', '-', '+', 10)).toEqual([]);
  });

  it('SIGKILL, then a restart under the same name: self-drain finds the entry waiting and tries it at its due time, not at once', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const worker = await startWorker(prefix, 'a', 2000, 60_000);
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => worker.out().includes(`try ${id} 1\n`), { message: 'the first try' });
    await waitFor(async () => (await redis.client().zscore(retrySetKey(key, 'g'), id)) !== null, { message: 'its retry to be recorded' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    await killed(worker.child);
    const again = await start({
      connection: redis.connection,
      group: 'g',
      consumer: 'a',
      keyPrefix: prefix,
      blockMs: 100,
      minIdleMs: 60_000,
    });
    const tries = timedTries(again);
    const ready = await serverNow();
    await waitFor(() => tries.length === 1, { message: 'the restarted worker to try it', timeoutMs: 20_000 });
    expect(tries[0]!.count).toBe(2);
    expect(tries[0]!.at).toBeGreaterThanOrEqual(due);
    // At its due time (its own timer; or at once, if restarting took past it), not minIdleMs (a minute) later:
    // a tenth of it leaves a busy machine ten times what a quiet one needs.
    expect(tries[0]!.at - Math.max(due, ready)).toBeLessThan(60_000 / 10);
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
    const peer = await start({
      connection: redis.connection,
      group: 'g',
      consumer: 'b',
      keyPrefix: prefix,
      blockMs: 100,
      minIdleMs: 1000,
      maxDeliveries: 3,
    });
    const tries = timedTries(peer);
    await waitFor(() => peer.settled.length === 1, { message: 'the peer to settle it', timeoutMs: 10_000 });
    expect(peer.settled[0]!.outcome).toBe('acked');
    expect(tries[0]!.count).toBe(retriedThere ? 3 : 2);
  });
});

describe('a graceful stop hands waiting entries back for their due time', () => {
  it('close() while an entry waits (delay 1500 ms, minIdleMs 60 s): a peer tries it at its due time, not a minute later', async () => {
    const prefix = uniquePrefix();
    const options = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 };
    const a = await start({ ...options, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 1500 } } });
    a.recorder.behavior = () => {
      throw new Error('first try fails');
    };
    const key = a.key();
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => a.settled.length === 1, { message: 'the first try to fail' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    await a.close();
    const peer = await start({ ...options, consumer: 'b' });
    const tries = timedTries(peer);
    const ready = await serverNow();
    await waitFor(() => tries.length === 1, { message: 'the peer to try it', timeoutMs: 20_000 });
    expect(tries[0]!.count).toBe(2);
    expect(tries[0]!.at).toBeGreaterThanOrEqual(due);
    // Handed back for its due time: the peer's next reclaim (every blockMs) takes it then (or at once, if starting
    // the peer took past it on a busy machine), not minIdleMs (a minute) later; a tenth of that is the bound.
    expect(tries[0]!.at - Math.max(due, ready)).toBeLessThan(options.minIdleMs / 10);
  });

  it('close() while an entry waits longer than minIdleMs (delay 2500 ms, minIdleMs 1200): a peer takes it, keeps it waiting, tries it at its due time', async () => {
    const prefix = uniquePrefix();
    // leaseRenewMs 1000: the slack of the idle resets that keep it waiting is leaseRenewMs / 2 (see the first test).
    const options = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 1200, leaseRenewMs: 1000 };
    const a = await start({ ...options, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 2500 } } });
    a.recorder.behavior = () => {
      throw new Error('first try fails');
    };
    const key = a.key();
    const id = (await redis.client().xadd(key, '*', 'data', '1'))!;
    await waitFor(() => a.settled.length === 1, { message: 'the first try to fail' });
    const due = Number(await redis.client().zscore(retrySetKey(key, 'g'), id));
    await a.close();
    const peer = await start({ ...options, consumer: 'b' });
    const tries = timedTries(peer);
    const ready = await serverNow();
    await waitFor(() => tries.length === 1, { message: 'the peer to try it', timeoutMs: 20_000 });
    expect(tries[0]!.count).toBe(2);
    expect(tries[0]!.at).toBeGreaterThanOrEqual(due);
    // No later than due (or the peer's start, if that took past it) + minIdleMs.
    expect(tries[0]!.at - Math.max(due, ready)).toBeLessThan(options.minIdleMs);
  });
});
