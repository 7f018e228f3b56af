import { MAX_PARTITIONS, maskUrl, type RedisStreamsClientOptions } from 'nestjs-redis-streams';

/**
 * The producer's client options from the environment, matching the worker's: REDIS_CLUSTER_URLS
 * (a cluster's seed nodes, comma-separated; wins over REDIS_URL), REDIS_URL, STREAMS_KEY_PREFIX,
 * and STREAMS_PARTITIONS (the `orders` stream as n partitions, as the worker reads it).
 */
export function clientOptions(env: NodeJS.ProcessEnv = process.env): RedisStreamsClientOptions {
  const partitions = partitionCount(env.STREAMS_PARTITIONS);
  return {
    connection: clusterUrls(env.REDIS_CLUSTER_URLS) ?? (env.REDIS_URL || 'redis://127.0.0.1:6379'),
    keyPrefix: env.STREAMS_KEY_PREFIX || '',
    ...(partitions === undefined ? {} : { partitions: { orders: partitions } }),
    // A demo stream that keeps growing would be a bad example: keep ~10k, never an unacked one.
    // (On a partitioned stream: per partition.)
    retention: { maxLen: 10_000, safe: true },
  };
}

/** REDIS_CLUSTER_URLS: comma-separated `redis://host:port` (or `rediss://`) URLs of cluster nodes; undefined when unset or empty. */
function clusterUrls(raw: string | undefined): string[] | undefined {
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
      const masked = maskUrl(url);
      throw new Error(
        `REDIS_CLUSTER_URLS must be comma-separated redis://host:port URLs of cluster nodes, got ${JSON.stringify(masked)} as node ${i + 1} of ${urls.length}`,
      );
    }
  });
  return urls;
}

/** STREAMS_PARTITIONS: a positive integer (at most MAX_PARTITIONS); undefined when unset or empty. */
function partitionCount(raw: string | undefined): number | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!/^\s*\d+\s*$/.test(raw) || !Number.isSafeInteger(value) || value < 1 || value > MAX_PARTITIONS) {
    throw new Error(`STREAMS_PARTITIONS must be a positive integer (1 to ${MAX_PARTITIONS}), got ${JSON.stringify(raw)}`);
  }
  return value;
}
