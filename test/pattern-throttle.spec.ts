/**
 * PatternThrottle (consumer/intake/pattern-throttle.ts): the admission of a pattern limited as a whole,
 * against its interface (pass, slow) on a real Redis. Its pass lets every entry start (the grants were
 * taken before the read); a handler's RateLimitedException slows the whole pattern in every worker of
 * the group: no reader of it gets a grant while the block lives.
 */
import { randomUUID } from 'node:crypto';
import { PatternThrottle } from '../libs/redis-streams/src/consumer/intake/pattern-throttle.js';
import { RateLimiter } from '../libs/redis-streams/src/consumer/intake/rate-limiter.js';
import { StopSignal } from '../libs/redis-streams/src/consumer/stop-signal.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const entry = { stream: 's', id: '1-0', fields: [], deliveryCount: 1 } as StreamEntry;

/** A pattern's throttle in worker `consumer`, and a reader's limiter of that pattern in another worker (its own connection). */
function patternOf(pattern = `p-${randomUUID().slice(0, 8)}`, consumer = 'c1') {
  const name = `app:${pattern}`;
  const throttle = new PatternThrottle({ pattern, name, limits: new StreamCommands(redis.client(), 'g').rateLimits, consumer });
  const limits = new StreamCommands(redis.newClient(), 'g').rateLimits;
  const peer = new RateLimiter({ limits, name, limit: { max: 100, perMs: 60_000 }, stop: new StopSignal() });
  return { throttle, peer, pattern };
}

describe('PatternThrottle', () => {
  it('passes every entry at once, with no command', () => {
    const { throttle } = patternOf();
    expect(throttle.pass()).toBeUndefined();
  });

  it("slow() names the pattern and holds every worker of the group: another worker's reader gets no grant for the time asked", async () => {
    const { throttle, peer, pattern } = patternOf();
    expect((await peer.acquire(1)).grants).toBe(1);
    const slowing = throttle.slow(entry, 30_000);
    expect(slowing.what).toBe(`"${pattern}"`);
    await slowing.slowed;
    const held = await peer.acquire(10);
    expect(held.grants).toBe(0);
    expect(held.waitMs).toBeGreaterThan(20_000);
    expect(held.waitMs).toBeLessThanOrEqual(30_000);
    // Another pattern of the group is not held.
    expect((await patternOf().peer.acquire(1)).grants).toBe(1);
  });

  it('a shorter slow() does not cut a longer one short; the block ends on its own after its time', async () => {
    const { throttle, peer } = patternOf();
    await throttle.slow(entry, 30_000).slowed;
    await throttle.slow(entry, 10).slowed;
    expect((await peer.acquire(1)).waitMs).toBeGreaterThan(20_000);
    const { throttle: brief, peer: briefPeer } = patternOf();
    await brief.slow(entry, 200).slowed;
    expect((await briefPeer.acquire(1)).grants).toBe(0);
    await waitFor(async () => (await briefPeer.acquire(1)).grants === 1, { message: 'grants again once the block ran out' });
  });
});
