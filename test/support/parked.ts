import type { Cluster, Redis } from 'ioredis';
import { waitFor } from './wait-for.js';

/** CLIENT LIST of the node, or of every master of a cluster (a lane parks on its slot's master). */
async function clientRows(admin: Redis | Cluster): Promise<string[]> {
  const nodes =
    'nodes' in admin && typeof admin.nodes === 'function' && (admin as Cluster).isCluster
      ? (admin as Cluster).nodes('master')
      : [admin as Redis];
  const lists = await Promise.all(nodes.map((n) => n.call('CLIENT', 'LIST', 'TYPE', 'normal')));
  return lists.flatMap((list) => String(list).split('\n'));
}

/** Waits until `count` blocking lanes whose connection name contains `name` are parked in XREADGROUP … BLOCK on the server (or cluster). */
export async function waitParked(
  admin: Redis | Cluster,
  name = ':blocking',
  message = 'the blocking lane to park',
  count = 1,
): Promise<void> {
  await waitFor(
    async () =>
      (await clientRows(admin)).filter((row) => row.includes(name) && / cmd=xreadgroup /.test(row) && / flags=b /.test(row)).length >=
      count,
    { message },
  );
}
