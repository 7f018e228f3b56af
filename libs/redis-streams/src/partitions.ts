/**
 * Partitioned streams: a logical stream `orders` written and read as N keys whose hash tags
 * hold the index (`{orders:0}` … `{orders:N-1}`), so a cluster spreads them over its masters
 * (`{orders}:0` … would all land in one slot). Server and client both map through here.
 */

/** Most partitions a stream may have (each is a stream key, and on a cluster a blocking connection). */
export const MAX_PARTITIONS = 64;

/** The key of partition `index` of `pattern`: `<keyPrefix>{<pattern>:<index>}`. */
export function partitionKey(keyPrefix: string, pattern: string, index: number): string {
  return `${keyPrefix}{${pattern}:${index}}`;
}

/** Every key of a stream of `partitions` partitions, in index order. */
export function partitionKeys(keyPrefix: string, pattern: string, partitions: number): string[] {
  return Array.from({ length: partitions }, (_, i) => partitionKey(keyPrefix, pattern, i));
}

/**
 * The partition of a routing key: FNV-1a (32 bit) of its UTF-8 bytes, modulo the count. The
 * same key gives the same partition in every process and release (never `Math.random` or
 * a per-process seed), as long as the count does not change.
 */
export function partitionOf(routingKey: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(routingKey, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

/** A partition count, validated: a whole number from 1 to MAX_PARTITIONS. */
export function checkPartitions(what: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_PARTITIONS) {
    throw new Error(`${what}: partitions must be a whole number from 1 to ${MAX_PARTITIONS}, got ${JSON.stringify(value)}`);
  }
  return value as number;
}
