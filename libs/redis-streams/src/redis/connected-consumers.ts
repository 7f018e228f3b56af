import type { Cluster, Redis } from 'ioredis';
import type { RedisConnection } from './connect.js';
import { decodeNamePart, encodeNamePart } from './connection-name.js';
import { parseClientNames } from './replies.js';

/**
 * The consumers of `group` that have a connection open now, told from the names this library gives
 * its connections (`<group>:<consumer>:command`, `…:blocking`, `…:<slot>[:batch]:blocking`, both
 * parts encoded by connection-name.ts, so a name has no ':' of its own and reads one way only).
 * Idle time cannot tell a live parked worker from a dead one: Redis 7.0 does not reset it on an
 * empty XREADGROUP BLOCK, Valkey 8 does but counts a park of blockMs as idle. A connection can.
 */
export async function connectedConsumers(redis: RedisConnection, group: string): Promise<Set<string>> {
  const nodes: Redis[] = (redis as Cluster).isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const prefix = `${encodeNamePart(group)}:`;
  const consumers = new Set<string>();
  for (const node of nodes) {
    for (const name of parseClientNames(await node.call('CLIENT', 'LIST', 'TYPE', 'normal'))) {
      if (!name.startsWith(prefix)) continue;
      const lane = /^([^:]+):(?:\d+:(?:batch:)?)?(?:command|blocking)$/.exec(name.slice(prefix.length))?.[1];
      const consumer = lane === undefined ? undefined : decodeNamePart(lane);
      if (consumer !== undefined) consumers.add(consumer);
    }
  }
  return consumers;
}
