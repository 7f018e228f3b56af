import { sameSlotKey } from '../slots.js';

const clusterKeys = new Map<string, string>();

/**
 * The retry set of `group` on `stream`: `orders:retry:<group>` (each group keeps its own
 * schedule, as it keeps its own pending list); on a cluster in the stream's slot, since the
 * scripts that read it touch the stream too (`{orders}:retry:<group>`, see sameSlotKey).
 */
export function retryKeyOf(stream: string, group: string, onCluster: boolean): string {
  const suffix = `:retry:${group}`;
  if (!onCluster) return `${stream}${suffix}`;
  const cached = clusterKeys.get(`${stream}\n${suffix}`);
  if (cached !== undefined) return cached;
  if (clusterKeys.size > 10_000) clusterKeys.clear();
  const key = sameSlotKey(stream, suffix);
  clusterKeys.set(`${stream}\n${suffix}`, key);
  return key;
}
