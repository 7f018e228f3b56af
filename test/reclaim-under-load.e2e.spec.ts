/**
 * Under constant load every park returns at once, and a beat skips the reclaim until one is due
 * (once per blockMs): a dead peer's entries must still be reclaimed while the load goes on.
 */
import type { Redis } from 'ioredis';
import { addOrders } from './support/batch-app.js';
import { useRedis } from './support/use-redis.js';
import { useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { groupOnNewStream } from './support/backlog.js';

const redis = useRedis();
const start = useApps();

/**
 * Keeps the consumer busy until stopped: the next entry goes out as soon as fewer than 20 written
 * ones wait to be settled (paced by the consumer, not by a clock), so no park waits long.
 */
function load(r: Redis, key: string, settledCount: () => number) {
  let on = true;
  const ids: string[] = [];
  const done = (async () => {
    while (on) {
      ids.push((await r.xadd(key, '*', 'n', 'load'))!);
      await waitFor(() => !on || ids.length - settledCount() < 20, { intervalMs: 5, message: 'consumer to keep up with the load' });
    }
  })();
  return { ids, stop: async () => ((on = false), await done) };
}

describe('under constant load', () => {
  it('reclaims a dead peer’s entries while the load goes on (every park returns at once)', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r);
    const dead = await addOrders(redis, key, 5);
    await r.xreadgroup('GROUP', 'g', 'dead', 'COUNT', 5, 'STREAMS', key, '>');
    const app = await start({
      connection: redis.url,
      group: 'g',
      consumer: 'live',
      keyPrefix: prefix,
      blockMs: 300,
      minIdleMs: 500,
      batchSize: 1,
    });
    app.recorder.behavior = () => new Promise<void>((res) => setImmediate(res));
    const l = load(redis.client(), key, () => app.settled.length);
    try {
      await waitFor(() => dead.every((id) => app.settled.some((e) => e.id === id && e.outcome === 'acked')), {
        // Due within minIdleMs + blockMs (800 ms); the defect is never, while the load lasts.
        message: 'dead peer entries reclaimed under load (due within minIdleMs + blockMs)',
        timeoutMs: 15_000,
      });
    } finally {
      await l.stop();
    }
    await waitFor(() => l.ids.every((id) => app.settled.some((e) => e.id === id)), { message: 'load drained' });
  });
});
