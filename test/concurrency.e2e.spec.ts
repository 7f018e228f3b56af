import { preloadOrders } from './support/backlog.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();

const preload = (prefix: string, n: number): Promise<string[]> => preloadOrders(redis.client(), prefix, n);

describe('concurrency and batched acks', () => {
  it('handles up to `concurrency` entries of a batch at once and acks the batch in one XACK', async (ctx) => {
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 8);
    const r = redis.client();
    const xackCalls = async () => Number(/cmdstat_xack:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
    const acksBefore = await xackCalls();
    let inFlight = 0;
    let maxInFlight = 0;
    const releases: (() => void)[] = [];
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: prefix, batchSize: 8, concurrency: 4, blockMs: 100 });
    app.recorder.behavior = () => {
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      return new Promise<void>((resolve) => releases.push(() => (inFlight--, resolve())));
    };
    for (let released = 0; released < 8; released++) {
      await waitFor(() => releases.length > released, { message: `handler ${released + 1} to start` });
      releases[released]!();
    }
    await waitFor(() => app.settled.length === 8, { message: 'eight acked entries' });
    expect(maxInFlight).toBe(4);
    expect(new Set(app.recorder.idsOf())).toEqual(new Set(ids));
    expect(app.settled.every((e) => e.outcome === 'acked')).toBe(true);
    expect(await r.xpending(app.key(), 'g', '-', '+', 10)).toEqual([]);
    if (!redis.owned) ctx.skip(); // commandstats are server-wide
    expect((await xackCalls()) - acksBefore).toBe(1);
  });

  it('on close, lets every entry in hand finish and be acked, and hands back the ones not started', async () => {
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 10);
    const app = await start({
      connection: redis.url,
      group: 'g',
      consumer: 'c',
      keyPrefix: prefix,
      batchSize: 10,
      concurrency: 3,
      blockMs: 100,
      minIdleMs: 60_000,
    });
    const releases: (() => void)[] = [];
    app.recorder.behavior = () => new Promise<void>((resolve) => releases.push(resolve));
    await waitFor(() => releases.length === 3, { message: 'three handlers in flight' });
    const closing = app.close();
    releases.forEach((release) => release());
    await closing;
    expect(app.settled.map((e) => e.outcome)).toEqual(['acked', 'acked', 'acked']);
    const pending = (await redis.client().xpending(app.key(), 'g', '-', '+', 20)) as [string, string, number, number][];
    // The seven not started stay pending, handed back (idle already past minIdleMs) with their count untouched.
    expect(pending.map(([id]) => id)).toEqual(ids.slice(3));
    expect(pending.every(([, , idle, count]) => idle >= 60_000 && count === 1)).toBe(true);
  });
});
