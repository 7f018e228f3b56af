/**
 * The lease (entries marked by their holding), against a real redis-server: a hung batch call with
 * concurrency 2 and a read-ahead, a peer reclaiming with a short minIdleMs, a partial failure
 * beside it; health's inHand; close() with the hung call.
 */
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { pendingCount } from './support/pending.js';
import { RpcException } from '@nestjs/microservices';
import { BatchFailure } from 'nestjs-redis-streams';
import { deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { redisProxy } from './support/redis-proxy.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

describe('lease: a hung batch call and a reclaiming peer', () => {
  it('the hung call’s entries and the read-ahead are never reclaimed; a failed one is; health counts what is in hand', async () => {
    const prefix = uniquePrefix();
    const Ctl = batchController('batched', { batch: { maxSize: 2 } });
    const opts = {
      connection: redis.connection,
      group: 'g',
      keyPrefix: prefix,
      blockMs: 50,
      // Fifteen renewals long: only a lease never renewed lets the peer take a held entry, not a renewal
      // a busy machine delayed (with 300 ms, a delay of 200 ms would have).
      minIdleMs: 1_500,
      leaseRenewMs: 100,
      concurrency: 2,
    };
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const running = new Map<string, string>(); // id -> consumer handling it now
    const twice: string[] = [];
    const handled: string[] = [];
    let hungIds: string[] = [];
    let failedId: string | undefined;
    const behave = (consumer: string) => async (entries: { payload: Record<string, string>; context: { getId(): string } }[]) => {
      const ids = entries.map((e) => e.context.getId());
      for (const id of ids) {
        if (running.has(id)) twice.push(`${id} by ${running.get(id)} and ${consumer}`);
        running.set(id, consumer);
      }
      try {
        if (consumer === 'c1' && hungIds.length === 0) {
          hungIds = ids;
          await released;
        } else if (consumer === 'c1' && failedId === undefined) {
          failedId = ids[0];
          throw new BatchFailure([{ entry: entries[0] as never, error: new Error('refused') }]);
        }
        handled.push(...ids);
      } finally {
        for (const id of ids) running.delete(id);
      }
    };
    // All 12 written before c1 starts (its behaviour set from the start): its first read takes them,
    // so the hung call is one of several and the next one runs beside it. Written while c1 was
    // parked, a read could return 1 or 2, a batch of one hung call that blocks the loop (the flake).
    const key = `${prefix}batched`;
    await addOrders(redis, key, 12);
    const log1 = Object.assign(new BatchLog(), { behavior: behave('c1') as never });
    const c1 = await start({ ...opts, consumer: 'c1' }, { controllers: [Ctl], providers: [{ provide: BatchLog, useValue: log1 }] });
    // The peer starts once c1 holds a hung call and has failed an entry.
    await waitFor(() => hungIds.length === 2 && failedId !== undefined, { message: 'a call hung, another failed one entry' });
    const c2 = await start({ ...opts, consumer: 'c2' }, { controllers: [Ctl], providers: [BatchLog] });
    c2.app.get(BatchLog).behavior = behave('c2') as never;
    try {
      // The failed entry is not held: the peer takes it after minIdleMs.
      await waitFor(() => handled.includes(failedId!), { message: 'the failed entry handled again', timeoutMs: opts.minIdleMs + 15_000 });
      // How the rest spreads over c1 and c2 depends on timing; what c1 holds must be exactly
      // what is pending under it (the hung call among it), as health says.
      const pendingUnder = async (consumer: string) =>
        ((await redis.client().xpending(key, 'g', '-', '+', 100)) as [string, string, number, number][]).filter((r) => r[1] === consumer);
      const inHandOf = async () => (await c1.server.health({ maxStatsAgeMs: 0 })).streams.find((x) => x.stream === key)?.inHand;
      await waitFor(
        async () => {
          const mine = (await pendingUnder('c1')).map((r) => r[0]);
          return (await inHandOf()) === mine.length && hungIds.every((id) => mine.includes(id));
        },
        { message: 'c1’s inHand equal to what is pending under it, the hung call among it' },
      );
      // Past minIdleMs later (unrenewed, it would be the peer's by then), all that is pending under c1 is held,
      // and kept fresh by its renewals.
      const t0 = Date.now();
      await waitFor(
        async () => {
          const mine = await pendingUnder('c1');
          const fresh = mine.every((r) => r[2] < opts.minIdleMs) && hungIds.every((id) => mine.some((r) => r[0] === id));
          return Date.now() - t0 > opts.minIdleMs + 500 && fresh && (await inHandOf()) === mine.length;
        },
        {
          message: 'past minIdleMs later: the hung call still c1’s, everything pending under c1 held and idle under minIdleMs',
          timeoutMs: opts.minIdleMs + 15_000,
        },
      );
      expect(twice).toEqual([]);
      expect(handled.filter((id) => hungIds.includes(id))).toEqual([]);
    } finally {
      release();
    }
    await waitFor(async () => handled.length >= 11 && (await pendingCount(redis, key)) === 0, { message: 'all handled, nothing pending' });
    expect(twice).toEqual([]);
    expect(new Set(handled).size).toBe(11); // all but the one acked beside the BatchFailure
    const h = await c1.server.health({ maxStatsAgeMs: 0 });
    expect(h.streams.find((x) => x.stream === key)!.inHand).toBe(0);
  });

  it('a lease renewal answered with the dead-letter moves of its entries (a client that reads late) does not take them back', async () => {
    // The call's four moves and the renewal after them reach Redis together, so their replies reach
    // the transport in one read: the renewal finds the entries gone while they are still held here.
    const proxy = await redisProxy(redis);
    try {
      const Ctl = batchController('batched', { batch: { maxSize: 4, maxWaitMs: 5_000 } });
      const app = await start(
        {
          connection: `redis://127.0.0.1:${proxy.port}`,
          group: 'g',
          consumer: 'c1',
          keyPrefix: uniquePrefix(),
          blockMs: 100,
          minIdleMs: 60_000,
          leaseRenewMs: 50,
          maxDeliveries: 1,
        },
        { controllers: [Ctl], providers: [BatchLog] },
      );
      const key = app.key('batched');
      proxy.holdRequestsFrom((text) => text.includes(deadLetterKey(key)));
      app.app.get(BatchLog).behavior = () => {
        throw new RpcException('bulk insert failed');
      };
      const ids = await addOrders(redis, key, 4);
      await waitFor(() => proxy.heldMatching(/\r\neval(sha)?\r\n/gi) >= 5, { message: 'four moves and a renewal held' });
      proxy.release();
      await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 4, { message: 'four dead letters' });
      // A round trip on the transport's command connection: whatever it sent on the renewal's answer has run.
      await app.server.health({ maxStatsAgeMs: 0 });
      expect((await redis.client().xrange(deadLetterKey(key), '-', '+')).length).toBe(4);
      // Moved means acked: none of them may be pending again, under anyone.
      expect(await pendingCount(redis, key)).toBe(0);
      expect(app.settled.map((e) => e.id)).toEqual(ids);
    } finally {
      await proxy.close();
    }
  });
});
