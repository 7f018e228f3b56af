import { spawn } from 'node:child_process';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { preloadOrders } from './support/backlog.js';
import { holdEventLoop } from './support/hold-event-loop.js';
import { waitParked } from './support/parked.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingRows } from './support/pending.js';

const redis = useRedis();

const start = useApps();

const preload = (prefix: string, n: number): Promise<string[]> => preloadOrders(redis.client(), prefix, n);

/** A handler that waits until the test releases it; `entered` counts the calls so far. */
function gate() {
  const releases: (() => void)[] = [];
  return {
    behavior: () => new Promise<void>((resolve) => releases.push(resolve)),
    get entered() {
      return releases.length;
    },
    releaseAll: () => releases.splice(0).forEach((release) => release()),
  };
}

/** Consumer `c` of group `g` on `prefix` (batches of 5, blockMs 100, minIdleMs a minute), `options` over those. */
const startC = (prefix: string, options: Partial<Parameters<typeof start>[0]> = {}) =>
  start({ connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, batchSize: 5, blockMs: 100, minIdleMs: 60_000, ...options });

/** startC, its handler held by a gate() until the test releases it. */
async function startHeld(prefix: string, options: Partial<Parameters<typeof start>[0]> = {}) {
  const app = await startC(prefix, options);
  const handler = gate();
  app.recorder.behavior = handler.behavior;
  return { app, handler };
}

describe('read-ahead', () => {
  it('reads the next batch while a full one is handled, and on close hands both unstarted parts back', async () => {
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 10);
    const { app, handler } = await startHeld(prefix);

    // The first entry is in hand and the second batch is already delivered to this consumer.
    await waitFor(async () => (await pendingRows(redis, app.key())).length === 10, { message: 'both batches pending under "c"' });
    expect(handler.entered).toBe(1);

    const closing = app.close();
    handler.releaseAll();
    await closing;
    expect(app.recorder.idsOf()).toEqual([ids[0]]);
    const pending = await pendingRows(redis, app.key());
    // The four not started of the first batch and the whole read-ahead batch: idle past minIdleMs, never handled.
    expect(pending.map(([id]) => id)).toEqual(ids.slice(1));
    expect(pending.every(([, , idle, count]) => idle >= 60_000 && count === 1)).toBe(true);

    // A peer's first reclaim takes them at once; each is handled exactly once overall.
    const peer = await startC(prefix, { consumer: 'd', batchSize: 10 });
    await waitFor(() => peer.settled.length === 9, { message: 'the peer settles the nine handed back' });
    expect(peer.settled.every((e) => e.outcome === 'acked' && e.source === 'reclaim')).toBe(true);
    expect([...app.recorder.idsOf(), ...peer.recorder.idsOf()].sort()).toEqual(ids);
    expect(await pendingRows(redis, app.key())).toEqual([]);
  });

  it('keeps the lease of a read-ahead batch while it waits its turn, so a peer cannot take it', async (ctx) => {
    if (!redis.owned) ctx.skip(); // counts XAUTOCLAIM calls server-wide
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 10);
    // minIdleMs twenty renewals long: only a lease never renewed lets the peer take the batch, not a
    // renewal the busy machine delayed (300 ms with renewals every 100 ms failed under load).
    const minIdleMs = 2_000;
    const short = { connection: redis.url, group: 'g', keyPrefix: prefix, batchSize: 5, blockMs: 50, minIdleMs, leaseRenewMs: 100 };
    const app = await start({ ...short, consumer: 'c' });
    const handler = gate();
    app.recorder.behavior = handler.behavior;
    await waitFor(async () => (await pendingRows(redis, app.key())).length === 10, { message: 'both batches pending under "c"' });
    // Both batches were delivered by now: unrenewed, they would be idle minIdleMs at this + minIdleMs.
    const deliveredBy = Date.now();

    const r = redis.client();
    const autoClaims = async () => Number(/cmdstat_xautoclaim:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
    const peer = await start({ ...short, consumer: 'd' });
    try {
      // Then two beats of the peer (one XAUTOCLAIM per stream it reads, orders and payments): an
      // unrenewed batch would be idle past minIdleMs at both, and taken.
      let past: number | undefined;
      await waitFor(
        async () => {
          if (Date.now() - deliveredBy <= minIdleMs) return false;
          past ??= await autoClaims();
          return (await autoClaims()) - past >= 4;
        },
        { message: 'two XAUTOCLAIM beats of the peer past minIdleMs', timeoutMs: minIdleMs + 20_000 },
      );
      expect(peer.recorder.calls).toEqual([]);
      expect((await pendingRows(redis, app.key())).every(([, consumer]) => consumer === 'c')).toBe(true);
    } finally {
      // A failed check must not leave the handler hung (afterEach closes the app).
      app.recorder.behavior = () => undefined;
      handler.releaseAll();
    }
    await waitFor(() => app.settled.length === 10, { message: 'all ten settled by "c"' });
    expect(app.recorder.idsOf()).toEqual(ids);
    expect(peer.recorder.calls).toEqual([]);
  });

  it('with readAhead: false, reads nothing more until the batch in hand is settled', async () => {
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 10);
    const { app, handler } = await startHeld(prefix, { readAhead: false });
    await waitFor(() => handler.entered === 1, { message: 'the first entry in hand' });
    const closing = app.close();
    handler.releaseAll();
    await closing;
    // Only the first batch was ever delivered: the group's last delivered id is its last entry.
    expect((await pendingRows(redis, app.key())).map(([id]) => id)).toEqual(ids.slice(1, 5));
    const [group] = (await redis.client().xinfo('GROUPS', app.key())) as unknown[][];
    expect(group![group!.indexOf('last-delivered-id') + 1]).toBe(ids[4]);
  });

  it('after a failed ack restarts the loop, runs a read-ahead batch once (self-drain takes it, not the stale read)', async () => {
    const prefix = uniquePrefix();
    const ids = await preload(prefix, 15);
    const admin = redis.client();
    const user = `ra-${prefix.slice(2, 10)}`;
    const connection = await aclUser(admin, redis.port, user, prefix, CONSUMER_ACL);
    try {
      const { app, handler } = await startHeld(prefix, { connection, retryInitialDelayMs: 50, retryMaxDelayMs: 500 });
      await waitFor(async () => (await pendingRows(redis, app.key())).length === 10, { message: 'first batch in hand, second read ahead' });

      // Acks now fail: the first batch's ack fails while the second batch is handled (and the
      // third read ahead); the second batch's ack reports it and the loop restarts.
      await admin.call('ACL', 'SETUSER', user, '-xack');
      const errors: string[] = [];
      app.consumer.on('error', (err: unknown) => {
        errors.push(String(err));
        void admin.call('ACL', 'SETUSER', user, '+xack');
      });
      app.recorder.behavior = () => undefined;
      handler.releaseAll();

      await waitFor(
        async () => errors.length > 0 && (await pendingRows(redis, app.key())).length === 0 && app.recorder.calls.length >= 25,
        {
          message: 'every entry acked after the restart',
        },
      );
      expect(errors[0]).toMatch(/NOPERM/);
      const runs = (id: string) => app.recorder.idsOf().filter((handled) => handled === id).length;
      // Their acks failed, so self-drain runs them again (at-least-once) ...
      expect(ids.slice(0, 10).map(runs)).toEqual(Array(10).fill(2));
      // ... but the read-ahead batch, delivered and never started, runs once.
      expect(ids.slice(10).map(runs)).toEqual(Array(5).fill(1));
      // Before the user goes: deleting it cuts its connections.
      await app.close();
    } finally {
      await admin.call('ACL', 'DELUSER', user);
    }
  });

  it('does not lose a read-ahead batch when a handler blocks the event loop past blockMs plus any client-side grace', async () => {
    const prefix = uniquePrefix();
    const [first] = await preload(prefix, 1);
    const blockMs = 1000;
    const app = await startC(prefix, { batchSize: 1, blockMs, minIdleMs: 600_000 });
    app.recorder.behavior = async (call) => {
      if (call.id !== first) return;
      // Once the read-ahead is parked, another process writes the next entry while this handler
      // holds the event loop well past BLOCK: Redis answers the park during the block.
      await waitParked(redis.client(), 'g:c:blocking', 'the read-ahead parked');
      spawn('redis-cli', ['-p', String(redis.port), 'XADD', app.key(), '*', 'n', 'during-the-block'], { stdio: 'ignore' });
      holdEventLoop(blockMs + 3500); // a synchronous handler: nothing else runs meanwhile
    };
    // minIdleMs is ten minutes: only the read-ahead itself can deliver the second entry in time.
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 2, {
      message: 'the entry written during the block handled',
      timeoutMs: 15_000,
    });
    expect(app.recorder.calls.map((c) => [c.payload, c.deliveryCount])).toEqual([
      [{ n: '0' }, 1],
      [{ n: 'during-the-block' }, 1],
    ]);
    expect(await pendingRows(redis, app.key())).toEqual([]);
  });
});

describe('read-ahead and its own reclaim', () => {
  it('does not run a held read-ahead batch twice when its own reclaim finds it idle (event loop blocked past minIdleMs)', async () => {
    const prefix = uniquePrefix();
    await preload(prefix, 4);
    let first = true;
    const app = await startC(prefix, { consumer: 'solo', batchSize: 2, blockMs: 200, minIdleMs: 1000, leaseRenewMs: 300 });
    app.recorder.behavior = () => {
      if (!first) return;
      first = false;
      holdEventLoop(1500); // no lease renewal meanwhile
    };
    await waitFor(() => new Set(app.settled.filter((e) => e.outcome === 'acked').map((e) => e.id)).size === 4, {
      message: 'four entries acked',
    });
    // Batches are settled in fetch order: once an entry written now is settled, every batch fetched before it is done.
    const end = await redis.client().xadd(app.key(), '*', 'n', 'end');
    await waitFor(() => app.settled.some((e) => e.id === end), { message: 'the end marker' });
    expect(app.recorder.calls.filter((c) => c.id !== end)).toHaveLength(4);
  });
});
