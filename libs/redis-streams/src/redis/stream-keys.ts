import type { Cluster, Redis } from 'ioredis';
import type { RedisConnection } from './connection/connect.js';
import { parseScanReply } from './replies/replies.js';

/** Every master of a cluster, or the one node. */
export function mastersOf(redis: RedisConnection): Redis[] {
  return (redis as Cluster).isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
}

/**
 * Stream keys matching `pattern` on every master (SCAN … COUNT 1000 TYPE stream, never KEYS), each with the
 * master it is on (`host:port`). An aborted `signal` rejects before the next SCAN: its owner has stopped.
 */
export async function scanStreamKeys(redis: RedisConnection, pattern: string, signal?: AbortSignal): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  const masters = mastersOf(redis);
  // A cluster that has reached no node yet knows no master: that is no answer, not "no streams".
  if (masters.length === 0) throw new Error('None of startup nodes is available');
  for (const node of masters) {
    const at = `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
    let cursor = '0';
    do {
      signal?.throwIfAborted();
      const scanned = parseScanReply(await node.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'stream'));
      cursor = scanned.cursor;
      for (const key of scanned.keys) keys.set(key, at);
    } while (cursor !== '0');
  }
  return keys;
}
