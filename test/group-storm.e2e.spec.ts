import { setTimeout as delay } from 'node:timers/promises';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

const start = useApps();

/** A small seeded PRNG, so a failing run can be replayed. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

describe('a storm of lost groups', () => {
  it('every entry that never failed succeeds while its group is destroyed forty times under three consumers; failed ones lost with a group are counted', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const n = 1500;
    const random = seeded(12345);
    const base = { connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 200, minIdleMs: 1500, retryInitialDelayMs: 20, batchSize: 5 };
    const apps = [
      await start({ ...base, consumer: 'a', concurrency: 1 }),
      await start({ ...base, consumer: 'b', concurrency: 2 }),
      await start({ ...base, consumer: 'c', concurrency: 3 }),
    ];
    const succeeded = new Map<string, number>();
    for (const app of apps) {
      app.recorder.behavior = async (call) => {
        await delay(Math.floor(random() * 60)); // the handler's own (simulated) I/O
        const tag = (call.payload as { tag: string }).tag;
        // One entry in ten fails on its first delivery: it is owed when its group goes.
        if (Number(tag.slice(1)) % 10 === 3 && call.deliveryCount === 1) throw new Error('first try fails');
        succeeded.set(tag, (succeeded.get(tag) ?? 0) + 1);
      };
    }
    const r = redis.client();
    const produce = async () => {
      for (let i = 0; i < n; i++) {
        await r.xadd(key, '*', 'tag', `e${i}`);
        if (i % 5 === 0) await delay(5);
      }
    };
    const storm = async () => {
      for (let i = 0; i < 40; i++) {
        await delay(20 + random() * 300);
        await r.xgroup('DESTROY', key, 'g').catch(() => undefined);
      }
    };
    await Promise.all([produce(), storm()]);
    const failsFirst = (i: number) => i % 10 === 3;
    const tags = [...Array(n).keys()];
    const missing = (which: (i: number) => boolean) => tags.filter(which).map((i) => `e${i}`).filter((tag) => !succeeded.has(tag));
    // Generous: owed entries of a lost group come back after minIdleMs, and CI runs other files alongside.
    // Every entry that never failed succeeds: none is lost with the forty groups.
    await waitFor(() => missing((i) => !failsFirst(i)).length === 0, { timeoutMs: 60_000, message: 'every entry that never failed to succeed' }).catch((err: Error) => {
      throw new Error(`${err.message}; ${missing((i) => !failsFirst(i)).length} never succeeded: ${missing((i) => !failsFirst(i)).slice(0, 20).join(', ')}`);
    });
    // A failed entry owed by a consumer that sent no command between the loss and a peer's re-creation
    // of the group (busy in a handler, no ack in between) can go with the group: the known gap
    // (docs/how-it-works.md, "Groups"). Seen in about one run in five, one or a few of 150; reported, not hidden.
    await waitFor(() => missing(failsFirst).length === 0, { timeoutMs: 10_000, message: 'the failed entries' }).catch(() => undefined);
    const lostFailed = missing(failsFirst);
    if (lostFailed.length > 0) console.warn(`group storm: ${lostFailed.length} of ${tags.filter(failsFirst).length} failed entries went with a lost group: ${lostFailed.join(', ')}`);
    expect(lostFailed.length).toBeLessThan(tags.filter(failsFirst).length / 10);
  }, 120_000);
});
