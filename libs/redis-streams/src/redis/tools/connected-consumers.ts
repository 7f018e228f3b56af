import type { RedisConnection } from '../connection/connect.js';
import { decodeNamePart } from '../connection/connection-name.js';
import { parseClientNames } from '../replies/info-replies.js';
import { mastersOf } from '../stream-keys.js';

/** The group and consumer a connection of this library's is named for (`<group>:<consumer>:command`, `…:blocking`, …); undefined for any other name. */
export function consumerOfConnectionName(name: string): { group: string; consumer: string } | undefined {
  const m = /^([^:]+):([^:]+):(?:\d+:(?:batch:)?)?(?:command|blocking)$/.exec(name);
  if (!m) return undefined;
  const group = decodeNamePart(m[1]!);
  const consumer = decodeNamePart(m[2]!);
  return group === undefined || consumer === undefined ? undefined : { group, consumer };
}

/**
 * Per group, the consumers that have a connection open now, told from the names this library gives
 * its connections (`<group>:<consumer>:command`, `…:blocking`, `…:<slot>[:batch]:blocking`, both
 * parts encoded by connection-name.ts, so a name has no ':' of its own and reads one way only):
 * one CLIENT LIST per master. Idle time cannot tell a live parked worker from a dead one: Redis 7.0
 * does not reset it on an empty XREADGROUP BLOCK, Valkey 8 does but counts a park of blockMs as
 * idle. A connection can.
 */
export async function connectedByGroup(redis: RedisConnection): Promise<Map<string, Set<string>>> {
  const byGroup = new Map<string, Set<string>>();
  for (const node of mastersOf(redis)) {
    for (const name of parseClientNames(await node.call('CLIENT', 'LIST', 'TYPE', 'normal'))) {
      const owner = consumerOfConnectionName(name);
      if (!owner) continue;
      if (!byGroup.has(owner.group)) byGroup.set(owner.group, new Set());
      byGroup.get(owner.group)!.add(owner.consumer);
    }
  }
  return byGroup;
}

/** The consumers of `group` that have a connection open now (see connectedByGroup). */
export async function connectedConsumers(redis: RedisConnection, group: string): Promise<Set<string>> {
  return (await connectedByGroup(redis)).get(group) ?? new Set();
}
