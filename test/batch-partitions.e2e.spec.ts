/**
 * Batch handlers: partitioned batch patterns, several batch patterns beside
 * single-entry ones in one app, on one node and on the cluster.
 */
import { BatchFailure } from 'nestjs-redis-streams';
import { BatchLog, batchController, deliveredOf } from './support/batch-app.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

const redis = useRedis();

const start = useApps();
const partitionKey = (prefix: string, pattern: string, i: number) => `${prefix}{${pattern}:${i}}`;

async function add(key: string, n: number, tag: string, from = 0): Promise<string[]> {
  const pipeline = redis.client().pipeline();
  for (let i = from; i < from + n; i++) pipeline.xadd(key, '*', 'order_id', `${tag}-${i}`);
  return (await pipeline.exec())!.map(([err, id]) => {
    if (err) throw err;
    return id as string;
  });
}

describe('batch handlers: partitioned and several batch patterns', () => {
  it('a partitioned batch pattern, a second batch pattern and the single-entry ones in one app: each entry once, to its own handler, calls of at most maxSize, all acked', async () => {
    const prefix = uniquePrefix();
    const P = batchController('parted', { partitions: 4, batch: { maxSize: 7, maxWaitMs: 200 } });
    const Q = batchController('plain', { batch: { maxSize: 3 } });
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: prefix, blockMs: 100, concurrency: 2 },
      { controllers: [P, Q], providers: [BatchLog] },
    );
    const log = app.app.get(BatchLog);
    const expected = new Map<string, string[]>();
    for (let p = 0; p < 4; p++) expected.set(partitionKey(prefix, 'parted', p), await add(partitionKey(prefix, 'parted', p), 25, `p${p}`));
    expected.set(`${prefix}plain`, await add(`${prefix}plain`, 20, 'plain'));
    const singles = await add(`${prefix}orders`, 5, 'single');
    await waitFor(
      async () => {
        for (const key of expected.keys())
          if ((await pendingCount(redis, key)) !== 0 || (await deliveredOf(redis, key)) === 0) return false;
        return app.recorder.calls.length === 5;
      },
      { message: 'everything acked' },
    );
    for (const [key, ids] of expected) {
      const got = log.calls.flatMap((c) => c.ids.map((id, i) => [c.streams[i], id, c.pattern] as const)).filter(([s]) => s === key);
      expect(got.map(([, id]) => id)).toEqual(ids);
      expect(got.every(([, , pattern]) => pattern === (key.includes('parted') ? 'parted' : 'plain'))).toBe(true);
    }
    expect(log.calls.every((c) => c.ids.length <= (c.pattern === 'parted' ? 7 : 3))).toBe(true);
    expect(app.recorder.idsOf()).toEqual(singles);
  });

  it('partitions whose entry ids coincide: a BatchFailure fails the listed entry of its own partition only', async () => {
    const prefix = uniquePrefix();
    const P = batchController('parted', { partitions: 2, batch: { maxSize: 10, maxWaitMs: 3_000 } });
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'c1', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 },
      { controllers: [P], providers: [BatchLog] },
    );
    const log = app.app.get(BatchLog);
    log.behavior = (entries) => {
      const target = entries.find((e) => e.context.getPartition() === 1 && e.context.getId() === '5-1');
      return target ? new BatchFailure([{ entry: target, error: new Error('refused') }]) : undefined;
    };
    const r = redis.client();
    // The same ids in both partitions (a producer in another language may pick explicit ids).
    for (const p of [0, 1]) for (const id of ['5-0', '5-1']) await r.xadd(partitionKey(prefix, 'parted', p), id, 'order_id', `${p}:${id}`);
    await waitFor(() => app.settled.length === 4, { message: 'four settled' });
    const outcome = Object.fromEntries(app.settled.map((e) => [`${e.stream} ${e.id}`, e.outcome]));
    expect(outcome).toEqual({
      [`${partitionKey(prefix, 'parted', 0)} 5-0`]: 'acked',
      [`${partitionKey(prefix, 'parted', 0)} 5-1`]: 'acked',
      [`${partitionKey(prefix, 'parted', 1)} 5-0`]: 'acked',
      [`${partitionKey(prefix, 'parted', 1)} 5-1`]: 'failed',
    });
  });
});
