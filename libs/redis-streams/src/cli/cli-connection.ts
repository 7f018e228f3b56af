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
export async function connect(values: { url?: string; cluster?: string }): Promise<RedisConnection> {
  const clusterUrls = values.cluster ?? (values.url ? undefined : process.env.REDIS_CLUSTER_URLS);
  const connection = resolveConnection(clusterUrls ? clusterUrls.split(',').map((u) => u.trim()) : (values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
  const redis = isCluster(connection)
    ? new Cluster(connection.cluster, { ...connection.options, lazyConnect: true, clusterRetryStrategy: () => null, redisOptions: { ...connection.options.redisOptions, maxRetriesPerRequest: 1 } })
    : new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  // ioredis rejects connect() with "Connection is closed."; the reason came as an 'error' event.
  let cause: unknown;
  redis.on('error', (err: unknown) => (cause = err));
  try {
    await redis.connect();
  } catch (err) {
    throw new Error(`cannot connect to ${describeConnection(connection)}: ${describeError(cause ?? err)}`);
  }
  return redis;
}

/** Runs a CLI's main: exit code 2 for usage errors (parseArgs' own included), 1 for failures, with the error on stderr. */
export function runMain(name: string, main: (argv: string[]) => Promise<number>): void {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`${name}: ${describeError(err)}`);
      process.exit(err instanceof Error && err.name === 'TypeError' && /parseArgs|Unknown option/i.test(err.message) ? 2 : 1);
    },
  );
}
