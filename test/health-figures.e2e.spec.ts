import { checkReadiness, partitionKeys } from 'nestjs-redis-streams';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { gate } from './support/gate.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();

// Runs on one node and on a cluster, where the three partitions are three slots, each its own reader.
describe('server.health() of a partitioned stream', () => {
  it('reports every partition’s lag, pending and entries in hand; readiness follows them down and up', async () => {
    const prefix = uniquePrefix();
    const keys = partitionKeys(prefix, 'jobs', 3);
    const admin = redis.client();
    for (const key of keys) for (let n = 0; n < 6; n++) await admin.xadd(key, '*', 'n', String(n));
    const { wait: released, open: release } = gate();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, batchSize: 2, readAhead: false }), {
      handlers: [{ pattern: 'jobs', extras: { partitions: 3 } }],
    });
    app.recorder.behavior = (call) => (call.pattern === 'jobs' ? released : undefined);
    try {
      // Every partition's first batch of 2 in hand (on a cluster, three readers fetch on their own).
      const health = await waitFor(
        async () => {
          const h = await app.server.health({ maxStatsAgeMs: 0 });
          const jobs = h.streams.filter((s) => keys.includes(s.stream));
          return jobs.length === 3 && jobs.every((s) => s.inHand === 2 && s.pending === 2) && h;
        },
        { message: 'a batch of 2 in hand on every partition' },
      );
      const jobs = health.streams.filter((s) => keys.includes(s.stream));
      expect(jobs.map((s) => s.stream).sort()).toEqual([...keys].sort());
      // Each partition's figures are its own: 2 in this consumer's hands, 4 still to read.
      expect(jobs.map((s) => s.lag)).toEqual([4, 4, 4]);
      expect(checkReadiness(health, { maxLag: 3 }).up).toBe(false);
    } finally {
      release(); // before afterEach closes the app, which waits for the entries in hand
    }
    await waitFor(async () => checkReadiness(await app.server.health({ maxStatsAgeMs: 0 }), { maxLag: 0, maxPending: 0 }).up, {
      message: 'drained and ready',
    });
    expect(app.recorder.calls.filter((c) => c.pattern === 'jobs')).toHaveLength(18);
  });
});
