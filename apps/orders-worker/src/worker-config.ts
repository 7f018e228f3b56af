import type { RedisStreamsServerOptions } from 'nestjs-redis-streams';

/** How the demo handler behaves; the chaos test turns on the knobs after `workMs`. */
export interface DemoBehaviour {
  /** Simulated work per order, in ms (DEMO_WORK_MS). */
  workMs: number;
  /** Up to this many ms more, at random (DEMO_WORK_JITTER_MS). */
  jitterMs: number;
  /** Fraction of deliveries whose handler throws (DEMO_FAIL_RATE, 0–1). */
  failRate: number;
  /** Seed of the handler's random numbers (DEMO_SEED), so a run can be repeated. */
  seed: number;
  /** When set, each successful handling does HINCRBY <key> <entry id> 1, to count duplicates (DEMO_RECORD_KEY). */
  recordKey: string | undefined;
  /** No log line per order (DEMO_QUIET=1). */
  quiet: boolean;
}

/** Reads the worker's settings from the environment (12-factor); unset means the transport default. */
export function workerConfig(env: NodeJS.ProcessEnv = process.env): { transport: RedisStreamsServerOptions; demo: DemoBehaviour } {
  const number = (name: string, parse: (raw: string) => number, check: (v: number) => boolean, what: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const value = parse(raw);
    if (!check(value)) throw new Error(`${name} must be ${what}, got ${JSON.stringify(raw)}`);
    return value;
  };
  const int = (name: string) => number(name, Number, Number.isSafeInteger, 'an integer');
  const transport: RedisStreamsServerOptions = {
    connection: env.REDIS_URL || 'redis://127.0.0.1:6379',
    group: env.STREAMS_GROUP || undefined,
    consumer: env.STREAMS_CONSUMER || undefined,
    batchSize: int('STREAMS_BATCH'),
    blockMs: int('STREAMS_BLOCK_MS'),
    minIdleMs: int('STREAMS_MIN_IDLE_MS'),
    maxDeliveries: int('STREAMS_MAX_DELIVERIES'),
    startupTimeoutMs: int('STREAMS_STARTUP_TIMEOUT_MS'),
    keyPrefix: env.STREAMS_KEY_PREFIX || undefined,
  };
  // Undefined keeps the transport default; dropping the keys keeps the options readable in logs.
  for (const key of Object.keys(transport) as (keyof RedisStreamsServerOptions)[]) {
    if (transport[key] === undefined) delete transport[key];
  }
  const demo: DemoBehaviour = {
    workMs: int('DEMO_WORK_MS') ?? 0,
    jitterMs: int('DEMO_WORK_JITTER_MS') ?? 0,
    failRate: number('DEMO_FAIL_RATE', Number, (v) => v >= 0 && v <= 1, 'a number from 0 to 1') ?? 0,
    seed: int('DEMO_SEED') ?? 1,
    recordKey: env.DEMO_RECORD_KEY || undefined,
    quiet: env.DEMO_QUIET === '1',
  };
  return { transport, demo };
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
