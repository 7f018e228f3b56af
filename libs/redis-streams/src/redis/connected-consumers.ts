import type { Cluster, Redis } from 'ioredis';
import type { RedisConnection } from './connect.js';
import { parseClientNames } from './replies.js';

/**
 * The consumers of `group` that have a connection open now, told from the names this library gives
 * its connections (`<group>:<consumer>:command`, `…:blocking`, `…:<slot>[:batch]:blocking`).
 * Idle time cannot tell a live parked worker from a dead one: Redis 7.0 does not reset it on an
 * empty XREADGROUP BLOCK, Valkey 8 does but counts a park of blockMs as idle. A connection can.
 * A name that reads two ways yields both candidates: one too many only keeps a consumer.
 */
export async function connectedConsumers(redis: RedisConnection, group: string): Promise<Set<string>> {
  const nodes: Redis[] = (redis as Cluster).isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const prefix = `${group}:`;
  const consumers = new Set<string>();
  for (const node of nodes) {
    for (const name of parseClientNames(await node.call('CLIENT', 'LIST', 'TYPE', 'normal'))) {
      if (!name.startsWith(prefix)) continue;
      const lane = /^(.+):(?:command|blocking)$/s.exec(name.slice(prefix.length))?.[1];
      if (lane === undefined) continue;
      consumers.add(lane);
      const perSlot = /^(.+):\d+(?::batch)?$/s.exec(lane)?.[1];
      if (perSlot !== undefined) consumers.add(perSlot);
    }
  }
  return consumers;
}
