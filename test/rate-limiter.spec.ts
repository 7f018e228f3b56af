/**
 * RateLimiter (consumer/intake/rate-limiter.ts) against its interface on a real Redis: a pattern's
 * grants are the group's window, shared by every reader of the pattern (two limiters here, each on a
 * connection of its own, as two workers), and what a read did not use goes back to it.
 */
import { randomUUID } from 'node:crypto';
import { RateLimiter } from '../libs/redis-streams/src/consumer/intake/rate-limiter.js';
import { StopSignal } from '../libs/redis-streams/src/consumer/stop-signal.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

/** Two workers' limiters of one pattern (a fresh name), `max` per `perMs`, each on its own connection. */
function twoWorkers(max: number, perMs = 60_000, stop = new StopSignal()) {
  const name = `rl:${randomUUID().slice(0, 8)}`;
  const of = (conn: ReturnType<typeof redis.client>) =>
    new RateLimiter({ limits: new StreamCommands(conn, 'g').rateLimits, name, limit: { max, perMs }, stop });
  return [of(redis.client()), of(redis.newClient())] as const;
}

describe('RateLimiter: grants from the group window', () => {
  it('two limiters of one pattern, asking at once, never get more than the window allows; then none, with a wait within the window', async () => {
    const [a, b] = twoWorkers(5);
    const asks = await Promise.all([a, b, a, b, a, b].map((l) => l.acquire(2)));
    expect(asks.reduce((n, g) => n + g.grants, 0)).toBe(5);
    const none = await b.acquire(1);
    expect(none.grants).toBe(0);
    expect(none.waitMs).toBeGreaterThan(0);
    expect(none.waitMs).toBeLessThanOrEqual(60_001);
  });

  it('asks for at most max in one acquire, and each acquire names its grants apart (a refund of one is not of another)', async () => {
    const [a] = twoWorkers(3);
    const first = await a.acquire(10);
    expect(first.grants).toBe(3);
    const second = await a.acquire(1);
    expect(second.prefix).not.toBe(first.prefix);
    expect(second.grants).toBe(0);
  });

  it('gives back what a read did not use, to every worker of the group; a read that used them all gives back nothing', async () => {
    const [a, b] = twoWorkers(5);
    const taken = await a.acquire(5);
    await a.refund(taken, 2);
    expect((await b.acquire(5)).grants).toBe(3);
    const none = await b.acquire(5);
    await b.refund(none, 0);
    expect((await a.acquire(5)).grants).toBe(0);
  });

  it("the window slides on Redis' clock: a full window grants again once its oldest grant is older than perMs", async () => {
    const [a, b] = twoWorkers(2, 300);
    expect((await a.acquire(2)).grants).toBe(2);
    expect((await b.acquire(1)).grants).toBe(0);
    await waitFor(async () => (await b.acquire(1)).grants === 1, { message: 'a grant once the window slid' });
  });

  it('takeOne waits for a grant while the window is full, and returns false once a stop ends the wait', async () => {
    const [a, b] = twoWorkers(1, 300);
    expect((await a.acquire(1)).grants).toBe(1);
    expect(await b.takeOne()).toBe(true);
    const stop = new StopSignal();
    const [c] = twoWorkers(1, 60_000, stop);
    expect((await c.acquire(1)).grants).toBe(1);
    const waiting = c.takeOne();
    stop.stop('stopping');
    expect(await waiting).toBe(false);
  });
});
