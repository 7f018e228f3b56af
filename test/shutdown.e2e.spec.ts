import { requireBuilt } from './support/built.js';
import { runFixtureToExit } from './support/fixture-process.js';
import { captureLogs } from './support/logs.js';
import { waitParked } from './support/parked.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { timed, waitFor } from './support/wait-for.js';
import { createGroup, preloadOrders } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

describe('shutdown at settle points', () => {
  it('app.close() during a slow handler waits for that entry to finish and be acked, and takes no new entry', async () => {
    const app = await start(consumerOptions(redis, { consumer: 'c', blockMs: 100, minIdleMs: 60_000 }));
    const r = redis.client();
    let release!: () => void;
    let finished = false;
    app.recorder.behavior = () =>
      new Promise<void>((resolve) => (release = resolve)).then(() => {
        finished = true;
      });
    const first = await r.xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the slow handler to start' });

    let closed = false;
    const closing = app.close().then(() => (closed = true));
    // Entries written while closing must be left for the group, not taken.
    const later = await r.xadd(app.key(), '*', 'n', '2');
    expect(closed).toBe(false);
    release();
    await closing;

    expect(finished).toBe(true);
    expect(app.settled.map((e) => [e.id, e.outcome])).toEqual([[first, 'acked']]);
    expect(app.recorder.idsOf()).toEqual([first]);
    const pending = (await r.xpending(app.key(), 'g', '-', '+', 10)) as [string][];
    // The later entry is either never delivered or handed back pending: never handled.
    expect(pending.map(([id]) => id).filter((id) => id !== later)).toEqual([]);
  });

  it('app.close() while parked on BLOCK 30000 wakes the park rather than wait it out', async () => {
    const blockMs = 30_000;
    const app = await start(consumerOptions(redis, { blockMs, minIdleMs: 60_000 }));
    // Make sure the loop is parked: one entry round-trips, then the consumer blocks again.
    await redis.client().xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.settled.length === 1, { message: 'the first entry' });
    await waitParked(redis.client());
    const { ms } = await timed(() => app.close());
    // Waiting the park out costs blockMs (30 s); a woken park, a few hundred ms on a busy machine.
    // A third of blockMs sits an order of magnitude from the latter and well short of the former.
    expect(ms).toBeLessThan(blockMs / 3);
  });

  it('hands back fetched entries it did not start, so a peer takes them on its next beat', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const r = redis.client();
    const ids = await preloadOrders(r, prefix, 5);
    // One read fetches all five: the first is in hand, four wait behind it in the batch.
    const leaving = await start(
      consumerOptions(redis, { consumer: 'leaving', keyPrefix: prefix, batchSize: 10, blockMs: 50, minIdleMs: 60_000 }),
    );
    let release!: () => void;
    leaving.recorder.behavior = () => new Promise<void>((resolve) => (release = resolve));
    await waitFor(() => leaving.recorder.calls.length === 1, { message: 'the first handler' });
    const closing = leaving.close();
    release();
    await closing;
    expect(leaving.recorder.idsOf()).toEqual([ids[0]]);

    // minIdleMs is a minute: only the hand-back (idle set to minIdleMs) lets the peer reclaim them now.
    const app = await start(consumerOptions(redis, { consumer: 'peer', keyPrefix: prefix, blockMs: 50, minIdleMs: 60_000 }));
    const peer = app;
    await waitFor(() => peer.settled.length === 4, { message: 'the peer to settle the four handed-back entries' });
    expect(peer.recorder.idsOf()).toEqual(ids.slice(1));
    expect(peer.settled.map((e) => e.source)).toEqual(['reclaim', 'reclaim', 'reclaim', 'reclaim']);
    // Handing back did not count as a delivery: the peer's is the second.
    expect(peer.recorder.calls.map((c) => c.deliveryCount)).toEqual([2, 2, 2, 2]);
    expect(await r.xpending(key, 'g', '-', '+', 10)).toEqual([]);
  });

  // A child process given one URL: the one-node run covers it.
  it.skipIf(CLUSTER_MODE)(
    'after shutdownTimeoutMs, close() is terminal: no timer or connection of the transport is left and the process exits by itself',
    async () => {
      requireBuilt('libs/redis-streams/dist/esm/index.js');
      // The lease renews every 300 ms here: a lease timer left running would keep the child alive.
      const { code, out } = await runFixtureToExit('hung-handler-close.mjs', [redis.url, uniquePrefix()]);
      expect(code, out).toBe(0);
      const report = JSON.parse(out.trim().split('\n').at(-1)!) as { closed: boolean; timersBefore: number; timersAfter: number };
      expect(report.closed).toBe(true);
      // No timer of the transport (lease, retry, wake) outlives close().
      expect(report.timersAfter).toBe(report.timersBefore);
    },
  );

  it('after shutdownTimeoutMs, a handler that finishes late changes nothing: no settled event, no write, and the unstarted entries were handed back at close', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    const key = `${prefix}orders`;
    await createGroup(r, key);
    for (let i = 0; i < 8; i++) await r.xadd(key, '*', 'n', String(i));
    const logs = captureLogs();
    const minIdleMs = 60_000;
    const app = await start(
      consumerOptions(redis, {
        consumer: 'c',
        keyPrefix: prefix,
        batchSize: 4,
        concurrency: 2,
        blockMs: 100,
        minIdleMs,
        shutdownTimeoutMs: 300,
      }),
      { logger: logs.logger },
    );
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let returned = 0;
    app.recorder.behavior = async () => {
      await released;
      returned++;
      throw new Error('late failure');
    };
    await waitFor(() => app.recorder.calls.length === 2, { message: 'two in hand' });
    await app.close();
    const settledAtClose = app.settled.length;
    const linesAtClose = logs.lines.length;
    // Abandoned: nothing is this consumer's any more, its health says so throughout (no handler in hand, none stuck).
    const after = await app.consumer.health({ stats: false });
    expect(after.streams.map((s) => [s.inHand, s.oldestInHand, s.stuckEntries])).toEqual(after.streams.map(() => [0, undefined, 0]));
    // Two in hand (abandoned, still pending); the two not started and the read-ahead batch handed back.
    const pending = (await r.xpending(key, 'g', '-', '+', 20)) as [string, string, number, number][];
    const inHand = new Set(app.recorder.idsOf());
    expect(pending.filter(([id]) => !inHand.has(id)).every(([, , idle]) => idle >= minIdleMs)).toBe(true);
    expect(pending.filter(([id]) => !inHand.has(id))).toHaveLength(6);
    release();
    await waitFor(() => returned === 2, { message: 'the late handlers to return' });
    // Let their continuations run (microtasks and already-failed I/O): a few turns of the event loop, not a timer.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(app.settled.length - settledAtClose).toBe(0);
    // Only the handler's own failure is logged (by Nest, and as "left pending", which it is); no write, warning or event of the transport.
    expect(
      logs.lines
        .slice(linesAtClose)
        .filter((l) => !/late failure|^error handler for stream .* failed on entry .*; left pending, next try .*$/.test(l)),
    ).toEqual([]);
  });
});
