import { runChaos } from './chaos/chaos-run.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { startRedis, type TestRedis } from './support/redis-server.js';

// CI runs 5,000 entries and at most 12 kills and stops; `npm run test:chaos` runs 100,000 (CHAOS_ENTRIES) and at
// most 40 (CHAOS_FAULTS), same seed unless CHAOS_SEED. Each fault restarts a worker process (about 1 CPU-s): 40 took
// CI's run to 45 s of faults, past the point where its 5,000 entries were produced; 20 cost 35 CPU-s of a CI run that
// is CPU-bound on 2 cores (2026-12-06: 650 to 720 s on one machine).
// CHAOS_CLUSTER=1 runs it on a local Redis Cluster (3 masters, 3 replicas) instead of one server.
const entries = Number(process.env.CHAOS_ENTRIES ?? 5000);
const seed = Number(process.env.CHAOS_SEED ?? 7);
const maxFaults = Number(process.env.CHAOS_FAULTS ?? 12);

const onCluster = process.env.CHAOS_CLUSTER === '1';
let redis: TestRedis | undefined;
let cluster: TestCluster | undefined;
beforeAll(async () => {
  if (onCluster) cluster = await startCluster();
  else redis = await startRedis();
}, 60_000);
afterAll(async () => {
  await redis?.stop();
  await cluster?.stop();
});

describe(`chaos: workers killed and restarted while a producer appends${onCluster ? ', on a Redis Cluster' : ''}`, () => {
  it(
    `loses nothing and leaves nothing pending (${entries} entries, seed ${seed})`,
    { timeout: Math.max(180_000, entries * 10) },
    async () => {
      const lines: string[] = [];
      const result = await runChaos({
        ...(cluster ? { clusterUrls: cluster.urls } : { redisUrl: redis!.url }),
        entries,
        seed,
        maxFaults,
        maxQuiesceMs: Math.max(120_000, entries * 2),
        log: (l) => lines.push(l),
      });
      const summary =
        `chaos: ${result.produced} entries, ${result.handled} handled, ${result.deadLettered} dead-lettered, ` +
        `${result.duplicates} duplicate deliveries, ${result.lost.length} lost; ${result.kills} SIGKILL, ${result.terms} SIGTERM, ` +
        `${result.restartsUnderNewName} renamed restarts; quiesced in ${result.quiesceMs} ms`;
      console.log([...lines, summary].join('\n'));

      expect(result.produced).toBe(entries);
      expect(result.lost).toEqual([]);
      expect(result.pending).toBe(0);
      expect(result.lag).toBe(0);
      expect(result.handled + result.deadLettered).toBeGreaterThanOrEqual(entries);
      expect(result.kills + result.terms).toBeGreaterThan(0);
      expect(result.finalExitCodes).toEqual(result.finalExitCodes.map(() => 0));
    },
  );
});
