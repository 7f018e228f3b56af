import { Cluster, Redis } from 'ioredis';
import { describeError } from '../describe-error.js';
import { describeConnection, isCluster, resolveConnection } from '../options/connection.js';
import type { RedisConnection } from '../redis/connect.js';

/** The `--url` / `--cluster` flags every sub-command takes. */
export const CONNECTION_FLAGS = { url: { type: 'string' }, cluster: { type: 'string' } } as const;

export const CONNECTION_HELP = `The URL defaults to $REDIS_URL, then redis://127.0.0.1:6379. On a Redis Cluster pass its nodes
instead: --cluster redis://host:port,redis://host:port (or $REDIS_CLUSTER_URLS).`;

/**
 * Connects as `--cluster`, `--url` or the environment say, refusing a bad URL like the server's
 * `connection` option does, and naming the server (password masked) and the cause when it cannot.
 */
/** A long-running command's reconnect backoff (the dashboard): a dropped connection comes back; one-shot commands fail at once. */
const reconnect = (tries: number): number => Math.min(tries * 200, 2_000);

export async function connect(values: { url?: string; cluster?: string }, { keepAlive = false } = {}): Promise<RedisConnection> {
  const clusterUrls = values.cluster ?? (values.url ? undefined : process.env.REDIS_CLUSTER_URLS);
  const connection = resolveConnection(
    clusterUrls ? clusterUrls.split(',').map((u) => u.trim()) : (values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
  );
  const redis = isCluster(connection)
    ? new Cluster(connection.cluster, {
        ...connection.options,
        lazyConnect: true,
        clusterRetryStrategy: keepAlive ? reconnect : () => null,
        redisOptions: { ...connection.options.redisOptions, maxRetriesPerRequest: 1 },
      })
    : new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: keepAlive ? reconnect : () => null });
  // ioredis rejects connect() with "Connection is closed."; the reason came as an 'error' event.
  let cause: unknown;
  redis.on('error', (err: unknown) => (cause = err));
  const failure = (err: unknown) =>
    new Error(`cannot connect to ${describeConnection(connection)}: ${describeError(nodeCause(cause) ?? err)}`);
  try {
    await redis.connect();
    // A refused handshake step (SELECT of a database that does not exist) arrives as an 'error' event after connect().
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw failure(err);
  }
  if (cause !== undefined) {
    redis.disconnect();
    throw failure(cause);
  }
  return redis;
}

/** ioredis' Cluster says only "Failed to refresh slots cache."; the node's own answer is the cause. */
function nodeCause(err: unknown): unknown {
  const node = (err as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  return node ?? err;
}

/** A wrong flag value or a missing argument: exit 2 with the usage, like parseArgs' own errors. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A positive whole number flag, at most `max`. */
export function positiveFlag(flag: string, raw: string | undefined, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(raw);
  if (raw === undefined || !Number.isSafeInteger(n) || n <= 0 || n > max)
    throw new UsageError(`${flag} must be a whole number from 1 to ${max}, got ${raw}`);
  return n;
}
