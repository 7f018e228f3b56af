import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer.js';

/** Files that start their own local Redis Cluster (failover tests must not disturb the shared one). */
const OWN_CLUSTER = ['test/cluster*.e2e.spec.ts'];

/**
 * The crash files once more on the cluster, in the full matrix (TEST_CLUSTER_CRASHES=1, which also runs delayed.e2e's
 * crash test there): workers killed -9 across fire and retry times. Their cluster part, the schedule's and the retry
 * set's keys in the stream's slot, is what schedules, retry and delayed meet on the cluster in CI; the kills are the
 * one-node files'. About 30 of the cluster project's 200 CPU-s (2026-12-06).
 */
const CLUSTER_CRASHES = ['test/schedules-crash.e2e.spec.ts', 'test/retry-crash.e2e.spec.ts'];

/** The core suites that run a second time on a local Redis Cluster (the `cluster` project). */
const ON_CLUSTER = [
  'test/delivery.e2e.spec.ts',
  'test/recovery.e2e.spec.ts',
  'test/shutdown.e2e.spec.ts',
  'test/dead-letter.e2e.spec.ts',
  'test/dlq.e2e.spec.ts',
  'test/client.e2e.spec.ts',
  'test/consumer-hygiene.e2e.spec.ts',
  'test/inspect-cli.e2e.spec.ts',
  'test/inspect-retry.e2e.spec.ts',
  'test/cli-operator.e2e.spec.ts',
  'test/consumer-liveness.e2e.spec.ts',
  'test/telemetry.e2e.spec.ts',
  'test/health-figures.e2e.spec.ts',
  'test/batch.e2e.spec.ts',
  'test/batch-partitions.e2e.spec.ts',
  'test/operator-actions.e2e.spec.ts',
  'test/retry.e2e.spec.ts',
  // Entries XCLAIMed by hand, then their consumer deleted: the retry set shares the stream's slot.
  'test/hand-claims.e2e.spec.ts',
  'test/dashboard-api.e2e.spec.ts',
  // The keyed-expiry script's record must share the stream's slot.
  'test/redis8-idempotent-produce.e2e.spec.ts',
  // Delayed delivery's schedule keys share the stream's slot (partitioned streams: one slot each); a rate limit's keys one slot.
  'test/delayed.e2e.spec.ts',
  'test/rate-limit.e2e.spec.ts',
  // What the dashboard reads of a rate limit: its record, window, block and held keys in the name's slot.
  'test/rate-limit-state.e2e.spec.ts',
  // A pattern's priority levels share their key's slot (one read takes them all).
  'test/priorities.e2e.spec.ts',
  // Repeatable schedules: their keys share the stream's slot with its delayed keys (one script fires into both).
  'test/schedules.e2e.spec.ts',
  ...(process.env.TEST_CLUSTER_CRASHES === '1' ? CLUSTER_CRASHES : []),
];

/**
 * The files whose outcome hangs on a server's own replies: idle times and `inactive` (consumer-liveness), error
 * wordings (secrets, connection-logs, wrong-server, out-of-memory, versions, and NOPERM: read-ahead,
 * reply-namespace), what replicas carry (failover-lag), NOGROUP and BUSYGROUP (group, group-recovery, startup),
 * CLIENT PAUSE and UNBLOCK (faults, health, park-faults), trimming (retention), the reclaim round and lease
 * scripts. CI runs them on Valkey 9 (TEST_SET=valkey or replies) and Redis 8.6 (in ON_NEWER); the full matrix runs a few on Valkey 8 (ON_VALKEY8).
 */
const ON_SERVER_REPLIES = [
  'test/consumer-liveness.e2e.spec.ts',
  'test/secrets.e2e.spec.ts',
  'test/wrong-server.e2e.spec.ts',
  'test/out-of-memory.e2e.spec.ts',
  'test/connection-logs.e2e.spec.ts',
  'test/versions.e2e.spec.ts',
  'test/group.e2e.spec.ts',
  'test/group-recovery.e2e.spec.ts',
  'test/startup.e2e.spec.ts',
  'test/faults.e2e.spec.ts',
  'test/health.e2e.spec.ts',
  'test/park-faults.e2e.spec.ts',
  'test/retention.e2e.spec.ts',
  'test/reclaim-round.e2e.spec.ts',
  'test/lease.e2e.spec.ts',
  'test/read-ahead.e2e.spec.ts',
  'test/reply-namespace.e2e.spec.ts',
  'test/failover-lag.e2e.spec.ts',
  // What KEDA's scalers read: XINFO's lag after trimming, XDEL, deleteOnAck and a failover differs per server.
  'test/autoscaling.e2e.spec.ts',
];

/** The core suites, without the CLI's (a process of its own, running the library code the others run in process). */
const CORE = ON_CLUSTER.filter((f) => !/\/(inspect-cli|cli-operator|redis8-)/.test(f));

/**
 * Valkey 9 (TEST_SET=valkey): the files whose outcome hangs on the server's replies, and the plain-Node worker's
 * processes. Its stream commands are Redis 7.0's (no CLAIM, XACKDEL or IDMP), so the loop takes the floor's path
 * there, which npm test runs.
 */
const ON_VALKEY = [
  ...ON_SERVER_REPLIES,
  // What the server offers, by version: Valkey 9's answers.
  'test/server-offer.spec.ts',
  // The plain-Node worker (nestjs-redis-streams/core) as a process of its own: asked for on Redis and on Valkey.
  'test/plain-node.e2e.spec.ts',
  'test/core-no-nest.e2e.spec.ts',
  // WAIT and WAITAOF's replies on Valkey, and what a frozen replica makes of them.
  'test/durable-produce.e2e.spec.ts',
  'test/durable-acks.e2e.spec.ts',
  // A blocked read served after an operator's command re-creates its consumer on Valkey (and Redis 7.2+), not on 7.0.
  'test/dead-letter-frozen.e2e.spec.ts',
  'test/rejoin-take-back.e2e.spec.ts',
];

/**
 * Valkey 8 (TEST_SET=valkey8, in the full matrix: CI_MATRIX=1 .ci/run): what may differ from Valkey 9 in replies the
 * transport reads: the feature detection (versions), idle times and `inactive` (consumer-liveness), error wordings
 * (secrets), NOGROUP after a restart (group-recovery), XINFO's lag; and flow control's scripts on Valkey. Its stream
 * commands are Valkey 9's.
 */
const ON_VALKEY8 = [
  'test/versions.e2e.spec.ts',
  'test/consumer-liveness.e2e.spec.ts',
  'test/secrets.e2e.spec.ts',
  'test/group-recovery.e2e.spec.ts',
  // XINFO's lag after trimming and XDEL: Valkey 8 keeps removed entries in it, Valkey 9 does not.
  'test/autoscaling.e2e.spec.ts',
  // Ordered patterns: ownership scripts, fenced acks and takeovers on Valkey's replies.
  'test/ordered.e2e.spec.ts',
  // Flow control's scripts (cjson, ZRANGE … BYSCORE, TIME) and pause flags on Valkey; fair groups' slots.
  'test/delayed.e2e.spec.ts',
  'test/pause.e2e.spec.ts',
  'test/rate-limit.e2e.spec.ts',
  // The dashboard's rate-limit script and the workers' record of held keys on Valkey.
  'test/rate-limit-state.e2e.spec.ts',
  'test/fair.e2e.spec.ts',
  'test/priorities.e2e.spec.ts',
  // Repeatable schedules' scripts (cjson, ZRANGE … BYSCORE LIMIT, HSCAN) on Valkey.
  'test/schedules.e2e.spec.ts',
  'test/schedules-crash.e2e.spec.ts',
];

/**
 * Redis 8.6 (TEST_SET=newer, with REDIS_SERVER_BIN=redis8-server): its new commands change the loop's path (the park's
 * read claims, retries waiting here are adopted from it), so the core suites (retries after a crash and operator
 * actions among them) and the server-reply files run there, with the files of those paths
 * (test/redis8-*). Not the core suites whose commands are the same on every server (SAME_ON_EVERY_SERVER: with
 * newerCommands the producer's IDMP and the dashboard's counters have redis8-* files), nor the retry schedule's scale
 * and operator files (retry-kinds, retry-operator): their scripts are the same on every server. Nor ON_CORE_HOST's files:
 * they run on Redis 8.6 on both hosts (TEST_HOST=core, and TEST_SET=conformance on the Nest host) in the full
 * matrix's conformance lane (CI_MATRIX=1 .ci/run). The chaos test on a Redis 8.6 cluster (CHAOS_CLUSTER=1).
 */
/**
 * Core suites whose commands are the same on every server: the producer, the operator's reads and tools, telemetry, what
 * the dashboard reads of a rate limit (its scripts' replies).
 */
const SAME_ON_EVERY_SERVER = [
  'test/rate-limit-state.e2e.spec.ts',
  'test/client.e2e.spec.ts',
  'test/dlq.e2e.spec.ts',
  'test/inspect-retry.e2e.spec.ts',
  'test/telemetry.e2e.spec.ts',
  'test/health-figures.e2e.spec.ts',
  'test/dashboard-api.e2e.spec.ts',
  'test/batch-partitions.e2e.spec.ts',
];
const ON_NEWER = [
  ...CORE.filter((f) => !SAME_ON_EVERY_SERVER.includes(f)),
  ...ON_SERVER_REPLIES,
  // A dead peer's large PEL taken over while new entries arrive: by the read's CLAIM there.
  'test/reclaim-interleave.e2e.spec.ts',
  // Issue 48's accounting run (kill -9, DELCONSUMER and XCLAIM by hand at once): the read's CLAIM takes back there.
  'test/operator-chaos.e2e.spec.ts',
  // Ordered patterns never take the read's CLAIM: their takeovers and retries go the floor's way there too.
  'test/ordered.e2e.spec.ts',
  'test/redis8-*.e2e.spec.ts',
  // What the server offers, by version: its answers on Redis 8.6 (npm test pins Redis 7.0's).
  'test/server-offer.spec.ts',
  // Durable produce and acks: WAITAOF where the server has it (fsync), the waits' replies.
  'test/durable-produce.e2e.spec.ts',
  'test/durable-acks.e2e.spec.ts',
];

/**
 * One suite, two hosts, each on Redis 7.0 and 8.6: the core suites CI runs once more with TEST_HOST=core, where
 * `startApp` (test/support/test-app.ts; TestWorker for a worker built as a StreamConsumer is) builds a plain
 * StreamConsumer instead of a Nest app. Their Nest-only tests (injection, Observables, interceptors) skip themselves
 * there, as do the ones with no host in them (a PauseWatch or a DelayedPromoter alone: the Nest pass has them). npm test
 * runs them on the Nest host on Redis 7.0; the full matrix's conformance lane (CI_MATRIX=1 .ci/run) on the
 * plain-Node host on Redis 7.0 and 8.6 (TEST_HOST=core) and on the Nest host on Redis 8.6 (TEST_SET=conformance). Not here: group-storm (it passes
 * on core, but its 37 s of mostly waiting doubled this pass, about 20 s to 40 s with 4 workers, for a
 * stress of the engine's group rejoin with nothing of the host in it but the handlers); lease.e2e
 * (no host: it drives the Lease alone).
 */
const ON_CORE_HOST = [
  'test/delivery.e2e.spec.ts',
  'test/recovery.e2e.spec.ts',
  'test/shutdown.e2e.spec.ts',
  'test/retry.e2e.spec.ts',
  'test/dead-letter.e2e.spec.ts',
  'test/operator-actions.e2e.spec.ts',
  'test/batch.e2e.spec.ts',
  'test/retry-crash.e2e.spec.ts',
  'test/reclaim-round.e2e.spec.ts',
  'test/read-ahead.e2e.spec.ts',
  // Ordering and flow control: ordered patterns, pause, delayed delivery, rate limits, fair groups.
  'test/ordered.e2e.spec.ts',
  'test/pause.e2e.spec.ts',
  'test/delayed.e2e.spec.ts',
  'test/rate-limit.e2e.spec.ts',
  'test/fair.e2e.spec.ts',
  'test/priorities.e2e.spec.ts',
  'test/schedules.e2e.spec.ts',
  'test/schedules-crash.e2e.spec.ts',
];

/** TEST_SET: which of the lists above the `node` project runs (unset: every file). */
const SETS: Record<string, string[]> = {
  valkey: ON_VALKEY,
  valkey8: ON_VALKEY8,
  newer: ON_NEWER.filter((f) => !ON_CORE_HOST.includes(f)),
  // ON_CORE_HOST on the Nest host, for a server npm test does not run (Redis 8.6: REDIS_SERVER_BIN=redis8-server).
  conformance: ON_CORE_HOST,
  replies: ON_SERVER_REPLIES,
};
const testSet = process.env.TEST_SET;
if (testSet && !SETS[testSet]) throw new Error(`TEST_SET=${testSet}: not one of ${Object.keys(SETS).join(', ')}`);

/** Test files run at once, of both projects together (TEST_WORKERS overrides). */
const WORKERS = Number(process.env.TEST_WORKERS ?? 4);

/** Test files to leave out, comma-separated (scripts/test-nest11.mjs: files that run once per CI). */
const SKIP = (process.env.TEST_SKIP ?? '').split(',').filter(Boolean);

export default defineConfig({
  resolve: {
    // Tests run against the library's source, imported by its package name as users do.
    alias: [
      { find: /^nestjs-redis-streams$/, replacement: fileURLToPath(new URL('./libs/redis-streams/src/index.ts', import.meta.url)) },
      {
        find: /^nestjs-redis-streams\/terminus$/,
        replacement: fileURLToPath(new URL('./libs/redis-streams/src/terminus/index.ts', import.meta.url)),
      },
      {
        find: /^nestjs-redis-streams\/core$/,
        replacement: fileURLToPath(new URL('./libs/redis-streams/src/core/index.ts', import.meta.url)),
      },
    ],
  },
  test: {
    globals: true,
    pool: 'forks',
    // A worker keeps its module cache from file to file: loading Nest, ioredis and the library once per
    // worker instead of once per file cut the suite's CPU time by a quarter. What a file sets globally
    // (OpenTelemetry) it unsets in afterAll, and the setup file unsets it again before every file.
    isolate: false,
    setupFiles: ['./test/support/reset-globals.ts'],
    // The page's script, bundled from its sources (the library's source imports it: see the file).
    globalSetup: ['./test/support/bundle-dashboard.ts'],
    // Transformed modules kept on disk (node_modules/.experimental-vitest-cache, keyed by content): CI's
    // later passes (chaos, npm test) and every worker after the first load them instead of transforming again.
    // Transform-time inputs outside the file (import.meta.env) are not in its key: nothing here uses them.
    experimental: { fsModuleCache: true },
    reporters: ['default', './test/support/summary-reporter.ts'],
    // The longest files first (as measured in CI), so that none starts last and runs on alone.
    sequence: { sequencer: SlowFirstSequencer },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      // Both projects run as one group (one groupOrder, one maxWorkers, as Vitest requires), so cluster
      // files run beside one-node files and beside each other: none stops a server it shares (each
      // one-node file has its own; the shared cluster's files skip what would disturb it, and failover
      // files start their own cluster). Four files at a time: they mostly wait on Redis, and Vitest's
      // default (cores - 1) is one worker on these 2-core machines.
      {
        extends: true,
        test: {
          name: 'node',
          include: process.env.TEST_HOST === 'core' ? ON_CORE_HOST : testSet ? SETS[testSet] : ['test/**/*.spec.ts'],
          // Fixtures' own test files run only inside the tests that start them (test/leftovers.spec.ts).
          exclude: [...OWN_CLUSTER, 'test/fixtures/**', ...SKIP],
          maxWorkers: WORKERS,
        },
      },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: [...ON_CLUSTER, ...OWN_CLUSTER],
          exclude: SKIP,
          env: { TEST_REDIS: 'cluster' },
          globalSetup: ['./test/support/cluster-global-setup.ts'],
          hookTimeout: 60_000,
          maxWorkers: WORKERS,
        },
      },
    ],
  },
});
