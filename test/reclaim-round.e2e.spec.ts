/**
 * One reclaim round: a batch at most over any number of streams, a failing stream that does not
 * lose what the others claimed, and trimmed entries cleared round after round.
 */
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { createGroup } from './support/backlog.js';
import { pendingCount } from './support/pending.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/** `n` entries in `key` (group g created first), delivered to `consumer` and never acked. */
async function deadPel(key: string, n: number, consumer = 'dead'): Promise<string[]> {
  const r = redis.client();
  await createGroup(r, key);
  const p = r.pipeline();
  for (let i = 0; i < n; i++) p.xadd(key, '*', 'n', String(i));
  const ids = ((await p.exec()) ?? []).map(([, id]) => String(id));
  await r.xreadgroup('GROUP', 'g', consumer, 'COUNT', n, 'STREAMS', key, '>');
  return ids;
}

/** Until every one of `keys`' pending entries is idle past `ms` (the server's clock). */
async function idlePast(keys: string[], ms: number): Promise<void> {
  const r = redis.client();
  await waitFor(
    async () => {
      for (const key of keys) {
        const idle = (await r.xpending(key, 'g', 'IDLE', ms, '-', '+', 1_000_000)) as unknown[];
        if (idle.length !== (await pendingCount(redis, key))) return false;
      }
      return true;
    },
    { message: `pending entries idle past ${ms} ms` },
  );
}

describe('a reclaim round', () => {
  it('claims one batch at most in all, however many streams hold idle entries: a new entry waits about one batch', async () => {
    const prefix = uniquePrefix();
    const keys = Array.from({ length: 40 }, (_, p) => `${prefix}{fan:${p}}`);
    for (const key of keys) await deadPel(key, 25);
    await idlePast(keys, 300);
    const app = await start(
      { connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 1000, minIdleMs: 300, batchSize: 4 },
      { handlers: [{ pattern: 'fan', extras: { partitions: 40 } }] },
    );
    const r = redis.client();
    let fresh: Promise<string | null> | undefined;
    app.recorder.behavior = (c) => void (c.pattern === 'fan' && (fresh ??= r.xadd(`${prefix}orders`, '*', 'n', 'fresh')));
    await waitFor(() => app.recorder.idsOf('orders').length === 1, { message: 'the new entry handled' });
    const freshId = await fresh!;
    const before = app.recorder.calls.findIndex((c) => c.id === freshId);
    // Before: COUNT was split over the 40 streams, at least 1 each: a round claimed 40 entries (ten batches of 4).
    // (42 streams: past MAX_CLAIM_STREAMS, so a reclaim sweep on any server; a CLAIM read would claim 4 per stream.)
    expect(before).toBeLessThanOrEqual(3 * 4);
    await waitFor(() => app.settled.length >= 40 * 25 + 1, { message: 'everything settled', progress: () => app.settled.length });
    expect(app.settled).toHaveLength(40 * 25 + 1);
  }, 600_000);

  it('a stream failing mid-round (its group gone) still hands over what the streams before it claimed, then the error', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    const ids = await deadPel(a, 5);
    // b exists, without the group: XAUTOCLAIM there answers NOGROUP after a's has taken effect (Lua does not roll back).
    await redis.client().xadd(b, '*', 'n', '0');
    const commands = new StreamCommands(redis.client(), 'g');
    const round = await commands.fetch.autoClaim(
      'live',
      0,
      [
        { stream: a, cursor: '0-0' },
        { stream: b, cursor: '0-0' },
      ],
      10,
    );
    expect(round.results[0]!.entries.map((e) => e.id)).toEqual(ids);
    expect(round.results[1]).toBeUndefined();
    expect(round.failure?.message).toMatch(/^NOGROUP /);
  });

  it('clears a dead peer’s trimmed entries round after round, not four calls per sweep', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const ids = await deadPel(key, 2000);
    await redis.client().xtrim(key, 'MAXLEN', 0);
    await idlePast([key], 300);
    // One sweep per minute: only the first, at start, can clear them within the wait.
    const app = await start({ connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 60_000, minIdleMs: 300 });
    await waitFor(async () => (await pendingCount(redis, key)) === 0, { message: 'the trimmed entries cleared from the PEL' });
    // The server clears them from the PEL as it answers the last XAUTOCLAIM: its reply (the last ids) may still be on its way.
    await waitFor(() => app.deleted.length >= ids.length, { message: 'every trimmed entry reported' });
    expect(new Set(app.deleted)).toEqual(new Set(ids));
    expect(app.recorder.calls).toEqual([]);
  });
});
