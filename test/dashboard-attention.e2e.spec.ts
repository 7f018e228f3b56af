// "Needs attention" on the overview, grouped per pattern: one dead worker on a 4-partition stream is one
// line naming the partitions, not one line per partition and per finding (issue 51: it made 8).
import type { Server } from 'node:http';
import { partitionKeys, serveDashboard } from 'nestjs-redis-streams';
import { deadLetterKey } from './support/redis-server.js';
import { forgeDeadLetter } from './support/dead-letter.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => (s.close(resolve), s.closeAllConnections()))));
});

async function overview(prefix: string, minIdleMs: number) {
  const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, minIdleMs });
  servers.push(server);
  const res = await fetch(`${url}api/overview`);
  return (await res.json()) as { attention: string[]; attentionItems: { text: string; page: string; key: string; group?: string }[] };
}

describe('dashboard attention, grouped per pattern', () => {
  it('one dead worker on a 4-partition stream is one line naming the partitions, its entries counted together', async () => {
    const prefix = uniquePrefix();
    const keys = partitionKeys(prefix, 'invoices', 4);
    for (const [i, key] of keys.entries()) {
      await redis.client().xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
      for (let n = 0; n <= i; n++) await redis.client().xadd(key, '*', 'data', '{}');
      // Read by "billing-1", which has no connection of this library's: a dead worker's entries.
      await redis.client().xreadgroup('GROUP', 'g', 'billing-1', 'STREAMS', key, '>');
    }
    // Idle past minIdleMs (1 ms here): each partition's oldest entry is flagged too.
    const idle = async () =>
      ((await redis.client().xpending(keys[3]!, 'g', '-', '+', 1)) as [string, string, number, number][])[0]?.[2] ?? 0;
    await waitFor(async () => (await idle()) >= 5);
    const o = await overview(prefix, 1);
    expect(o.attention).toHaveLength(1);
    expect(o.attention[0]).toMatch(
      new RegExp(
        `^${prefix}\\{invoices:\\*\\} \\(partitions 0–3\\): "billing-1" owns 10 pending entries in group "g" but has no connection: they wait for a peer's reclaim; the oldest idle .+, past minIdleMs 1 ms$`,
      ),
    );
    // It opens the first partition's group.
    expect(o.attentionItems[0]).toMatchObject({ page: 'stream', key: keys[0], group: 'g' });
  });

  it("a pattern's dead letters are one line too; a stream that is no partition keeps its own lines", async () => {
    const prefix = uniquePrefix();
    const keys = partitionKeys(prefix, 'mail', 3);
    for (const key of keys) {
      await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
      await forgeDeadLetter(redis.client(), deadLetterKey(key), key);
    }
    await forgeDeadLetter(redis.client(), deadLetterKey(keys[1]!), keys[1]!);
    const plain = `${prefix}plain`;
    await redis.client().xgroup('CREATE', plain, 'g', '$', 'MKSTREAM');
    await forgeDeadLetter(redis.client(), deadLetterKey(plain), plain);
    const o = await overview(prefix, 30_000);
    expect(o.attention).toEqual([
      `${prefix}plain: 1 dead letter in "${deadLetterKey(plain)}"`,
      `${prefix}{mail:*} (partitions 0–2): 4 dead letters in its partitions' dead-letter streams`,
    ]);
    expect(o.attentionItems[1]).toMatchObject({ page: 'dead', key: deadLetterKey(keys[0]!) });
  });
});
