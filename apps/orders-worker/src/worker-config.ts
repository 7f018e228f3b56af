import { MAX_PARTITIONS, maskUrl, type RedisStreamsServerOptions } from 'nestjs-redis-streams';
import { retryPolicy } from './retry-config.js';

/** How the demo handler behaves; the chaos test turns on the knobs after `workMs`. */
export interface DemoBehaviour {
  /** Simulated work per order, in ms (DEMO_WORK_MS). */
  workMs: number;
  /** Up to this many ms more, at random (DEMO_WORK_JITTER_MS). */
  jitterMs: number;
  /** Fraction of deliveries whose handler throws (DEMO_FAIL_RATE, 0–1). */
  failRate: number;
  /** Each order's first n deliveries throw (DEMO_FAIL_FIRST; Redis' delivery count), to watch a retry schedule. */
  failFirst: number;
  /** Seed of the handler's random numbers (DEMO_SEED), so a run can be repeated. */
  seed: number;
  /** When set, each successful handling does HINCRBY <key> <entry id> 1, to count duplicates (DEMO_RECORD_KEY). */
  recordKey: string | undefined;
  /** No log line per order (DEMO_QUIET=1). */
  quiet: boolean;
}

/** The worker's settings: the transport's options, the demo handler's behaviour, the `orders` stream's partitions. */
export interface WorkerConfig {
  transport: RedisStreamsServerOptions;
  /** `transport.connection`: REDIS_URL, or the node URLs of REDIS_CLUSTER_URLS. */
  connection: string | string[];
  demo: DemoBehaviour;
  /** Partition count of the `orders` stream (STREAMS_PARTITIONS); undefined: one plain stream. */
  ordersPartitions: number | undefined;
  /** Orders handled by a batch handler of at most this many entries (DEMO_BATCH_MAX, waiting up to DEMO_BATCH_WAIT_MS); undefined: one at a time. */
  ordersBatch: { maxSize: number; maxWaitMs?: number } | undefined;
  /** DEMO_ORDERED=1: `orders` is an ordered pattern, each customer's orders handled one at a time, in order (docs/guide/ordering.md). */
  ordersOrdered: boolean;
}

/** Reads the worker's settings from the environment (12-factor); unset means the transport default. */
export function workerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const number = (name: string, parse: (raw: string) => number, check: (v: number) => boolean, what: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const value = parse(raw);
    if (!check(value)) throw new Error(`${name} must be ${what}, got ${JSON.stringify(raw)}`);
    return value;
  };
  const int = (name: string) => number(name, Number, Number.isSafeInteger, 'an integer');
  // A cluster (REDIS_CLUSTER_URLS, its seed nodes) wins over one server (REDIS_URL).
  const connection = clusterUrls(env.REDIS_CLUSTER_URLS) ?? (env.REDIS_URL || 'redis://127.0.0.1:6379');
  const transport: RedisStreamsServerOptions = {
    connection,
    group: env.STREAMS_GROUP || undefined,
    consumer: env.STREAMS_CONSUMER || undefined,
    batchSize: int('STREAMS_BATCH'),
    concurrency: int('STREAMS_CONCURRENCY'),
    blockMs: int('STREAMS_BLOCK_MS'),
    minIdleMs: int('STREAMS_MIN_IDLE_MS'),
    maxDeliveries: int('STREAMS_MAX_DELIVERIES'),
    startupTimeoutMs: int('STREAMS_STARTUP_TIMEOUT_MS'),
    keyPrefix: env.STREAMS_KEY_PREFIX || undefined,
    retry: retryPolicy(env.STREAMS_RETRY),
  };
  // Undefined keeps the transport default; dropping the keys keeps the options readable in logs.
  for (const key of Object.keys(transport) as (keyof RedisStreamsServerOptions)[]) {
    if (transport[key] === undefined) delete transport[key];
  }
  const demo: DemoBehaviour = {
    workMs: int('DEMO_WORK_MS') ?? 0,
    jitterMs: int('DEMO_WORK_JITTER_MS') ?? 0,
    failRate: number('DEMO_FAIL_RATE', Number, (v) => v >= 0 && v <= 1, 'a number from 0 to 1') ?? 0,
    failFirst: number('DEMO_FAIL_FIRST', wholeNumber, Number.isSafeInteger, 'a whole number (0 or more)') ?? 0,
    seed: int('DEMO_SEED') ?? 1,
    recordKey: env.DEMO_RECORD_KEY || undefined,
    quiet: env.DEMO_QUIET === '1',
  };
  const batchMax = number('DEMO_BATCH_MAX', Number, (v) => Number.isSafeInteger(v) && v > 0, 'a positive integer');
  const batchWaitMs = number('DEMO_BATCH_WAIT_MS', Number, (v) => Number.isSafeInteger(v) && v >= 0, 'an integer of 0 or more');
  if (batchWaitMs !== undefined && batchMax === undefined) throw new Error('DEMO_BATCH_WAIT_MS needs DEMO_BATCH_MAX');
  const ordersBatch =
    batchMax === undefined ? undefined : { maxSize: batchMax, ...(batchWaitMs === undefined ? {} : { maxWaitMs: batchWaitMs }) };
  if (env.DEMO_ORDERED !== undefined && !['', '0', '1'].includes(env.DEMO_ORDERED))
    throw new Error(`DEMO_ORDERED must be 1 or 0, got ${JSON.stringify(env.DEMO_ORDERED)}`);
  const ordersOrdered = env.DEMO_ORDERED === '1';
  if (ordersOrdered && ordersBatch)
    throw new Error('DEMO_ORDERED=1 and DEMO_BATCH_MAX together: an ordered pattern takes single-entry handlers');
  return { transport, connection, demo, ordersPartitions: partitionCount(env.STREAMS_PARTITIONS), ordersBatch, ordersOrdered };
}

/** Digits only (`Number` would take `1e3`, `0x10`, `-0`); NaN otherwise, which the check refuses. */
const wholeNumber = (raw: string): number => (/^\d+$/.test(raw.trim()) ? Number(raw) : NaN);

/**
 * REDIS_CLUSTER_URLS: comma-separated seed nodes of a Redis Cluster (`redis://host:port`, or
 * `rediss://`), e.g. `redis://127.0.0.1:7000,redis://127.0.0.1:7001`. Any reachable node will
 * do: the client discovers the others. Undefined when unset or empty.
 */
export function clusterUrls(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const urls = raw.split(',').map((url) => url.trim());
  urls.forEach((url, i) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      // reported below
    }
    if (!parsed || (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') || !parsed.hostname) {
      throw new Error(
        `REDIS_CLUSTER_URLS must be comma-separated redis://host:port URLs of cluster nodes, got ${JSON.stringify(maskUrl(url))} as node ${i + 1} of ${urls.length}`,
      );
    }
  });
  return urls;
}

/** STREAMS_PARTITIONS: the `orders` stream as n keys `{orders:0}` … `{orders:n-1}`. Undefined when unset or empty. */
export function partitionCount(raw: string | undefined): number | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!/^\s*\d+\s*$/.test(raw) || !Number.isSafeInteger(value) || value < 1 || value > MAX_PARTITIONS) {
    throw new Error(`STREAMS_PARTITIONS must be a positive integer (1 to ${MAX_PARTITIONS}), got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** mulberry32: a small seeded PRNG, so a chaos run's handler failures can be replayed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
