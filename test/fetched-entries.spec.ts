/** Sorting what a fetch brought (consumer/read/fetched-entries.ts) against a real Redis: counts, and entries gone from the PEL meanwhile. */
import { withDeliveryCounts } from '../libs/redis-streams/src/consumer/read/fetched-entries.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { createGroup } from './support/backlog.js';
import { pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { addEntries, useUnitLoops } from './support/unit-loop.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const loops = useUnitLoops(redis);

describe('withDeliveryCounts', () => {
  it('takes back, with its count, an entry dropped from the PEL just after it was fetched (XGROUP DELCONSUMER), instead of skipping it as acked', async () => {
    const key = `${uniquePrefix()}orders`;
    const r = redis.client();
    await createGroup(r, key);
    const ids = await addEntries(r, key, 3);
    // Fetched by c (as a reclaim fetches: its counts not read yet but the second's, known from an earlier read).
    await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 3, 'STREAMS', key, '>');
    const entries: StreamEntry[] = ids.map((id, i) => ({ stream: key, id, fields: ['n', id], deliveryCount: i === 1 ? 2 : 0 }));
    const loop = loops.open({ streams: [key] });
    loop.custody.received(entries, performance.now());
    // An operator deletes c before its count lookup; then the third entry goes to another consumer.
    expect(await r.xgroup('DELCONSUMER', key, 'g', 'c')).toBe(3);
    await r.xgroup('SETID', key, 'g', ids[1]!);
    await r.xreadgroup('GROUP', 'g', 'other', 'COUNT', 1, 'STREAMS', key, '>');
    const warnings: string[] = [];
    const kept = await withDeliveryCounts(
      {
        custody: loop.custody,
        commands: new StreamCommands(r, 'g'),
        consumer: 'c',
        maxWaitingRetries: 100,
        minIdleMs: 10_000,
        logger: { log: () => {}, warn: (m: string) => void warnings.push(m), error: (m: string) => void warnings.push(m) },
      },
      entries,
    );
    // The first two were in nobody's pending list: pending under c again, with the counts c knew (at least this delivery).
    expect(kept.map((e) => [e.id, e.deliveryCount])).toEqual([
      [ids[0], 1],
      [ids[1], 2],
    ]);
    const rows = await pendingRows(redis, key);
    expect(rows.map(([id, owner, , count]) => [id, owner, Number(count)])).toEqual([
      [ids[0], 'c', 1],
      [ids[1], 'c', 2],
      [ids[2], 'other', 1],
    ]);
    expect(warnings).toEqual([
      expect.stringMatching(new RegExp(`^entry ${ids[2]} .*now "other"'s\\): skipped`)),
      expect.stringMatching(/^entries .* were in nobody's pending list just after this consumer fetched them \(XGROUP DELCONSUMER/),
    ]);
    expect(loop.custody.heldIds()).toEqual(new Map([[key, [ids[0], ids[1]]]]));
  });
});
