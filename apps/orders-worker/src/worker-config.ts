import type { RedisStreamsServerOptions } from 'nestjs-redis-streams';

/** Reads the worker's settings from the environment (12-factor); unset means the transport default. */
export function workerConfig(env: NodeJS.ProcessEnv = process.env): { transport: RedisStreamsServerOptions; workMs: number } {
  const int = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const value = Number(raw);
    if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
    return value;
  };
  const transport: RedisStreamsServerOptions = {
    connection: env.REDIS_URL || 'redis://127.0.0.1:6379',
    group: env.STREAMS_GROUP || undefined,
    consumer: env.STREAMS_CONSUMER || undefined,
    batchSize: int('STREAMS_BATCH'),
    blockMs: int('STREAMS_BLOCK_MS'),
    minIdleMs: int('STREAMS_MIN_IDLE_MS'),
    keyPrefix: env.STREAMS_KEY_PREFIX || undefined,
  };
  // Unset keys would be "unknown options" to nobody, but undefined keeps the default: drop them for clarity.
  for (const key of Object.keys(transport) as (keyof RedisStreamsServerOptions)[]) {
    if (transport[key] === undefined) delete transport[key];
  }
  return { transport, workMs: int('DEMO_WORK_MS') ?? 0 };
}
