import { setTimeout as delay } from 'node:timers/promises';
import { parseGroupInfo } from '../libs/redis-streams/src/redis/replies/info-replies.js';
import { isQuiesced } from './support/pending.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();

/** A small seeded PRNG, so a failing run can be replayed. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

describe('a storm of lost groups', () => {
  // Batch size 5: mostly single entries in flight; 50: whole fetched batches, and read-ahead batches, in hand when a group goes.
  // 'destroy': XGROUP DESTROY alone, the consumers re-create the group. 'reset': DESTROY then XGROUP CREATE at the
  // last-delivered id read just before, as an operator resetting the pending list would: the group comes back a little
  // below what some consumers already fetched, and their reads go on without an error to tell them.
  it.each([
    [5, 'destroy'],
    [50, 'destroy'],
    [100, 'reset'],
  ] as const)(
    'batch size %i, %s: loses no entry that never failed, and at most 10 of the 150 that fail once, while its group is lost forty times under three consumers',
    async (batchSize, mode) => {
      const prefix = uniquePrefix();
      const key = `${prefix}orders`;
      const n = 1500;
      const random = seeded(12345);
      const base = {
        connection: redis.url,
        group: 'g',
        keyPrefix: prefix,
        blockMs: 200,
        minIdleMs: 1500,
        retryInitialDelayMs: 20,
        batchSize,
      };
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
          const last = mode === 'reset' ? parseGroupInfo(await r.xinfo('GROUPS', key).catch(() => []), 'g')?.lastDeliveredId : undefined;
          await r.xgroup('DESTROY', key, 'g').catch(() => undefined);
          if (last !== undefined) await r.xgroup('CREATE', key, 'g', last).catch(() => undefined);
        }
      };
      await Promise.all([produce(), storm()]);
      const failsFirst = (i: number) => i % 10 === 3;
      const tags = [...Array(n).keys()];
      const missing = (which: (i: number) => boolean) =>
        tags
          .filter(which)
          .map((i) => `e${i}`)
          .filter((tag) => !succeeded.has(tag));
      // Until every entry succeeded, or none can come back. Owed entries of a lost group return after minIdleMs, and a
      // consumer re-owns a failed entry a peer re-created the group above (its owed-entry check runs every leaseRenewMs / 2):
      // so the group must stay settled (nothing pending, the last entry delivered) for minIdleMs before the missing count as
      // lost. Generous bound: CI runs other files alongside; past it the test still reports and bounds what is missing.
      let settledSince: number | undefined;
      const settledForGood = async () => {
        if (!(await isQuiesced(redis, key))) return (settledSince = undefined);
        settledSince ??= Date.now();
        return Date.now() - settledSince >= base.minIdleMs;
      };
      await waitFor(async () => missing(() => true).length === 0 || (await settledForGood()), {
        timeoutMs: 30_000,
        message: 'every entry to succeed, or the group to stay settled',
      }).catch(() => undefined);
      // An entry that never failed is never lost: what a consumer fetched is taken back with the group, whatever became
      // of it (before issue 35: whole batches of 5 to 100, up to 109 entries in a run at batch size 50; then, until the
      // rejoin kept what was held across a rejoin that failed, one whole batch in about 4 of 50 loaded runs). What is
      // left (docs/how-it-works.md, "Groups"): a failed entry without a retry policy whose consumer read from a group a
      // peer re-created above it before its owed-entry check noticed the loss, and whose check then came too late for
      // the time rule (no group identity marker yet): 0 in 25 runs at load 6-10, then 5 of the 150 in 1 of 8 runs at
      // load about 15 (a review, 2026-12-03). Reported on every run, and bounded at 10 of the 150 that fail once: how
      // late a check comes is the machine's, and the bound is on the window, not on the load.
      const lost = missing(() => true);
      if (lost.length > 0)
        console.warn(
          `group storm (batch size ${batchSize}): ${lost.length} of ${n} entries went with a lost group (${missing(failsFirst).length} of them had failed once): ${lost.join(', ')}`,
        );
      expect(missing((i) => !failsFirst(i))).toEqual([]);
      expect(missing(failsFirst).length).toBeLessThanOrEqual(10);
    },
    120_000,
  );
});
