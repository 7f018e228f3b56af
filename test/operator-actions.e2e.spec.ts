import { spawn } from 'node:child_process';
import { gate } from './support/gate.js';
import { holdEventLoop } from './support/hold-event-loop.js';
import { captureLogs } from './support/logs.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps, type AppExtras, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount, pendingRows } from './support/pending.js';
import { retrySetKey } from './support/redis-server.js';

// Operators' commands on a live group (REVIEW.md, class 1): what the transport must not lose or repeat.

const redis = useRedis();

const start = useApps();

/** Consumer `a` of group `g` on a prefix of its own (blockMs 100), `options` over those. */
const startA = (options: Omit<Parameters<typeof start>[0], 'connection'>, extras?: AppExtras) =>
  start({ connection: redis.connection, group: 'g', consumer: 'a', keyPrefix: uniquePrefix(), blockMs: 100, ...options }, extras);

/**
 * A peer in another process (this one is about to be held): once the entries are idle past `minIdleMs`
 * it XCLAIMs them to consumer `b` (as XAUTOCLAIM would) and XACKs them.
 */
function peerClaimsAndAcks(key: string, minIdleMs: number, ids: string[]): void {
  const cli = `redis-cli -c -p ${redis.port}`;
  const peer = `sleep ${(minIdleMs + 400) / 1000}; ${cli} XCLAIM ${key} g b ${minIdleMs} ${ids.join(' ')} JUSTID; ${cli} XACK ${key} g ${ids.join(' ')}`;
  spawn('sh', ['-c', peer], { stdio: 'ignore' });
}

const tagOf = (c: { payload: unknown }) => (c.payload as { tag: string }).tag;
const callsOf = (apps: TestApp[], tag: string) => apps.flatMap((a) => a.recorder.calls.filter((c) => tagOf(c) === tag));
async function settled(apps: TestApp[], id: string, outcome = 'acked', timeoutMs = 10_000): Promise<void> {
  await waitFor(() => apps.some((a) => a.settled.some((e) => e.id === id && e.outcome === outcome)), {
    message: `${id} ${outcome}`,
    timeoutMs,
  });
}

describe('XGROUP DELCONSUMER of a live consumer', () => {
  it('does not lose the entry it had failed: the consumer knows what it owes and takes it back', async () => {
    const { logger, text } = captureLogs();
    const a = await startA({ minIdleMs: 1500 }, { logger });
    a.recorder.behavior = (c) => {
      if (tagOf(c) === 'bad' && c.deliveryCount === 1) throw new Error('first try fails');
    };
    const bad = (await redis.client().xadd(a.key(), '*', 'tag', 'bad'))!;
    await settled([a], bad, 'failed');
    // An operator's clean-up script: Redis drops the consumer's pending entries with it.
    expect(await redis.client().xgroup('DELCONSUMER', a.key(), 'g', 'a')).toBe(1);
    await settled([a], bad);
    expect(callsOf([a], 'bad').map((c) => c.deliveryCount)).toEqual([1, 2]);
    expect(await pendingCount(redis, a.key())).toBe(0);
    expect(text()).toMatch(/nobody's pending list.*XGROUP DELCONSUMER/);
  });

  it('does not lose the entry in hand when it fails after the delete', async () => {
    const a = await startA({ minIdleMs: 1500 });
    const { wait, open } = gate();
    a.recorder.behavior = async (c) => {
      if (c.deliveryCount === 1) {
        await wait;
        throw new Error('fails after the delete');
      }
    };
    const id = (await redis.client().xadd(a.key(), '*', 'tag', 'held'))!;
    try {
      await waitFor(() => a.recorder.calls.length === 1, { message: 'the entry in hand' });
      expect(await redis.client().xgroup('DELCONSUMER', a.key(), 'g', 'a')).toBe(1);
      // Its lease renewal finds it gone and takes it back while the handler still runs.
      await waitFor(async () => (await pendingCount(redis, a.key())) === 1, { message: 'the entry pending again' });
    } finally {
      open();
    }
    await settled([a], id);
    expect(callsOf([a], 'held').map((c) => c.deliveryCount)).toEqual([1, 2]);
  });

  it('does not lose a failed entry deleted with its consumer while the loop is busy in a long handler', async () => {
    const minIdleMs = 3000;
    const a = await startA({ minIdleMs, leaseRenewMs: 1000, batchSize: 1 });
    const { wait, open } = gate();
    a.recorder.behavior = async (c) => {
      if (tagOf(c) === 'bad' && c.deliveryCount === 1) throw new Error('first try fails');
      if (tagOf(c) === 'slow') await wait;
    };
    const r = redis.client();
    const bad = (await r.xadd(a.key(), '*', 'tag', 'bad'))!;
    await settled([a], bad, 'failed');
    await r.xadd(a.key(), '*', 'tag', 'slow');
    const idleOf = async (id: string) =>
      Number(((await r.xpending(a.key(), 'g', 'IDLE', 0, id, id, 1)) as [string, string, number, number][])[0]?.[2] ?? -1);
    try {
      await waitFor(() => a.recorder.calls.some((c) => tagOf(c) === 'slow'), { message: 'slow in hand' });
      // Due for its retry (minIdleMs - leaseRenewMs) while the loop is busy; no peer can have it yet.
      await waitFor(async () => (await idleOf(bad)) >= minIdleMs - 1000, { message: 'the failed entry due' });
      expect(await r.xgroup('DELCONSUMER', a.key(), 'g', 'a')).toBe(2);
      await waitFor(async () => (await idleOf(bad)) >= 0, { message: 'the failed entry taken back' });
    } finally {
      open();
    }
    await settled([a], bad);
    expect(callsOf([a], 'bad').map((c) => c.deliveryCount)).toEqual([1, 2]);
  });

  it('does not lose entries waiting for their retry when the check that finds them deleted comes late: their retry records say nobody tried them since', async () => {
    const minIdleMs = 1500;
    const a = await startA({ minIdleMs, retry: { backoff: { type: 'fixed', delayMs: 3000 } } });
    a.recorder.behavior = (c) => {
      if (tagOf(c) !== 'ok' && c.deliveryCount === 1) throw new Error('first try fails');
    };
    const r = redis.client();
    const ids: string[] = [];
    for (const tag of ['w0', 'w1', 'w2']) ids.push((await r.xadd(a.key(), '*', 'tag', tag))!);
    for (const id of ids) await settled([a], id, 'failed');
    expect(await r.xgroup('DELCONSUMER', a.key(), 'g', 'a')).toBe(3);
    // A new entry comes and is handled: its read lists the consumer in the group again, only its pending entries are gone.
    await settled([a], (await r.xadd(a.key(), '*', 'tag', 'ok'))!);
    expect(((await r.xinfo('CONSUMERS', a.key(), 'g')) as unknown[][]).some((c) => c[1] === 'a')).toBe(true);
    // Then its event loop is held past minIdleMs (a busy machine): by the time its check finds them gone, a peer's
    // reclaim could have taken them as far as its clock can tell.
    holdEventLoop(minIdleMs + 200);
    // No peer exists: each is retried here, once, at its due time.
    for (const id of ids) await settled([a], id, 'acked', 15_000);
    for (const tag of ['w0', 'w1', 'w2']) expect(callsOf([a], tag).map((c) => c.deliveryCount)).toEqual([1, 2]);
    expect(await pendingCount(redis, a.key())).toBe(0);
  });

  it('reports an id deleted again after the stream was re-created with it and it was delivered anew (review-c)', async () => {
    const a = await startA({ minIdleMs: 1500 });
    const held = [gate(), gate()];
    a.recorder.behavior = async () => {
      await held[a.recorder.calls.length - 1]!.wait;
    };
    const r = redis.client();
    await r.xadd(a.key(), '1-1', 'tag', 'first');
    await waitFor(() => a.recorder.calls.length === 1, { message: 'the first in hand' });
    await r.xdel(a.key(), '1-1');
    await waitFor(() => a.deleted.length === 1, { message: 'the first deletion reported' });
    held[0]!.open();
    // An operator loads the stream anew with explicit ids (a replay, a fixture): the same id, another entry.
    await r.multi().del(a.key()).xadd(a.key(), '1-1', 'tag', 'second').xgroup('CREATE', a.key(), 'g', '0').exec();
    await waitFor(() => a.recorder.calls.length === 2, { message: 'the second in hand' });
    await r.xdel(a.key(), '1-1');
    await waitFor(() => a.deleted.length === 2, { message: 'the second deletion reported' });
    held[1]!.open();
    expect(a.deleted).toEqual(['1-1', '1-1']);
  });

  it("reports an id deleted again after the stream was re-created with it and a dead peer held it: found by this consumer's reclaim (review-d)", async () => {
    const minIdleMs = 1500;
    const a = await startA({ minIdleMs });
    const held = gate();
    a.recorder.behavior = async () => {
      await held.wait;
    };
    const r = redis.client();
    const xacks = async () => Number(/cmdstat_xack:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
    await r.xadd(a.key(), '1-1', 'tag', 'first');
    await waitFor(() => a.recorder.calls.length === 1, { message: 'the first in hand' });
    await r.xdel(a.key(), '1-1');
    await waitFor(() => a.deleted.length === 1, { message: 'the first deletion reported' });
    const reportedAt = performance.now();
    // Its ack reaches Redis before the id is loaded anew (it would ack the new entry).
    const acked = await xacks();
    held.open();
    await waitFor(async () => (await xacks()) > acked, { message: "the first entry's ack run" });
    // Past the window in which a repeat is taken for the same report (leaseRenewMs, minIdleMs / 3): the trade of the fix.
    await waitFor(() => performance.now() - reportedAt > minIdleMs / 3, { message: 'leaseRenewMs since the first report' });
    // Loaded anew with the same id, read at once by peer "b" (in one MULTI: before "a" can), which then dies with it.
    await r
      .multi()
      .del(a.key())
      .xadd(a.key(), '1-1', 'tag', 'second')
      .xgroup('CREATE', a.key(), 'g', '0')
      .xreadgroup('GROUP', 'g', 'b', 'COUNT', 1, 'STREAMS', a.key(), '>')
      .exec();
    await r.xdel(a.key(), '1-1');
    // "a"'s reclaim (XAUTOCLAIM drops a deleted entry whatever its idle time) meets it: a second loss.
    await waitFor(async () => (await pendingCount(redis, a.key())) === 0, { message: 'dropped by the reclaim' });
    await waitFor(() => a.deleted.length === 2, { message: 'the second deletion reported' });
    expect(a.deleted).toEqual(['1-1', '1-1']);
  });

  it('reports an owed entry deleted by hand once, whichever path finds it first', async () => {
    const a = await startA({ minIdleMs: 3000 });
    a.recorder.behavior = (c) => {
      if (tagOf(c) === 'gone' || (tagOf(c) === 'retried' && c.deliveryCount === 1)) throw new Error('fails');
    };
    const r = redis.client();
    const gone = (await r.xadd(a.key(), '*', 'tag', 'gone'))!;
    const retried = (await r.xadd(a.key(), '*', 'tag', 'retried'))!;
    await settled([a], retried, 'failed');
    // XDEL keeps the id in the pending list: XAUTOCLAIM reports it at once (Redis 7.0), the owed-entry checks meet it again.
    await r.xdel(a.key(), gone);
    await waitFor(() => a.deleted.includes(gone), { message: 'a deleted event' });
    // The other owed entry's retry comes after several checks of both.
    await settled([a], retried, 'acked', 15_000);
    expect(a.deleted).toEqual([gone]);
    expect(await pendingCount(redis, a.key())).toBe(0);
  });

  it('under load, two workers with failing entries and three deletes lose nothing', async () => {
    const prefix = uniquePrefix();
    const base = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 1000, batchSize: 10 };
    const apps = [await start({ ...base, consumer: 'w1' }), await start({ ...base, consumer: 'w2' })];
    for (const app of apps) {
      app.recorder.behavior = (c) => {
        if (Number(tagOf(c)) % 10 === 0 && c.deliveryCount === 1) throw new Error('every 10th first delivery fails');
      };
    }
    const key = apps[0]!.key();
    const r = redis.client();
    const total = 400;
    for (let i = 0; i < total; i++) {
      await r.xadd(key, '*', 'tag', String(i));
      if (i % 100 === 50) await r.xgroup('DELCONSUMER', key, 'g', i % 200 === 50 ? 'w1' : 'w2');
      // Paced by the workers (at most 20 unsettled), so deletes find failed entries pending.
      if (i % 10 === 9)
        await waitFor(() => apps.reduce((n, a) => n + a.settled.filter((e) => e.outcome === 'acked').length, 0) >= i - 20 - i / 10, {
          message: `pace ${i}`,
        });
    }
    const handled = () => new Set(apps.flatMap((a) => a.settled.filter((e) => e.outcome === 'acked').map((e) => e.id)));
    const ids = (await r.xrange(key, '-', '+')).map(([id]) => id);
    await waitFor(() => ids.every((id) => handled().has(id)), { message: 'every entry handled', timeoutMs: 20_000 }).catch(
      async (err: Error) => {
        const lost = ids.filter((id) => !handled().has(id));
        throw new Error(
          `${err.message}: ${lost.length} of ${total} never handled (${lost.slice(0, 5).join(', ')}), ${await pendingCount(redis, key)} pending`,
        );
      },
    );
    // Nothing left pending: an entry a delete took from a worker mid-handling may be delivered once more
    // (at least once) and still be in hand when the last id is first handled.
    await waitFor(async () => (await pendingCount(redis, key)) === 0, { message: 'nothing pending' }).catch(async (err: Error) => {
      const rows = await pendingRows(redis, key);
      throw new Error(`${err.message}: ${JSON.stringify(rows)}`);
    });
  }, 60_000);
});

describe('XCLAIM by hand of entries in hand', () => {
  it("runs them here to their end, batch-mates too, and acks what succeeds: out of the new owner's pending list, said once (docs/failure-semantics.md)", async () => {
    const { logger, text } = captureLogs();
    const a = await startA({ minIdleMs: 60_000, leaseRenewMs: 200, batchSize: 4 }, { logger });
    const key = a.key();
    const r = redis.client();
    const { wait, open } = gate();
    a.recorder.behavior = async (c) => {
      if (tagOf(c) === 'first') await wait;
    };
    // One batch: the first entry held in its handler, the other two waiting their turn behind it.
    const tx = r.multi();
    for (const tag of ['first', 'x1', 'x2']) tx.xadd(key, '*', 'tag', tag);
    const ids = ((await tx.exec()) ?? []).map(([, id]) => id as string);
    await waitFor(() => a.recorder.calls.length === 1, { message: 'first in hand' });
    // An operator gives the whole batch to another consumer while the first runs.
    await r.xclaim(key, 'g', 'op', 0, ...ids, 'JUSTID');
    await waitFor(() => text().includes(`now "op"'s`), { message: "a's lease to find them op's" });
    expect(text()).toContain('a success here still acks them');
    open();
    for (const id of ids) await settled([a], id);
    expect(a.recorder.calls.map((c) => tagOf(c))).toEqual(['first', 'x1', 'x2']);
    expect(await pendingCount(redis, key)).toBe(0);
  });
});

describe('acks that find entries no longer pending', () => {
  it('after a lease lapse during which a peer took and settled both entries of the batch, runs neither again and does not call it a lost group', async () => {
    const { logger, text } = captureLogs();
    const minIdleMs = 1000;
    const a = await startA({ minIdleMs, batchSize: 2 }, { logger });
    const key = a.key();
    const r = redis.client();
    // The batch [E1, E2] in one read: added while a is busy with a first entry.
    const { wait, open } = gate();
    a.recorder.behavior = async (c) => {
      if (tagOf(c) === 'first') await wait;
      if (tagOf(c) === 'e1') throw new Error('E1 fails here');
      if (tagOf(c) === 'e2') {
        // A peer takes both and settles them. Then E2 holds the event loop past minIdleMs: the lease lapses.
        peerClaimsAndAcks(key, minIdleMs, [e1, e2]);
        holdEventLoop(minIdleMs + 2000);
      }
    };
    await r.xadd(key, '*', 'tag', 'first');
    await waitFor(() => a.recorder.calls.length === 1, { message: 'first in hand' });
    const e1 = (await r.xadd(key, '*', 'tag', 'e1'))!;
    const e2 = (await r.xadd(key, '*', 'tag', 'e2'))!;
    open();
    await settled([a], e2);
    const after = (await r.xadd(key, '*', 'tag', 'after'))!;
    await settled([a], after);
    // Given every chance to go wrong: two owed-entry checks and a reclaim after the lapse.
    await waitFor(() => a.settled.filter((e) => e.outcome === 'acked').length >= 3, { message: 'acks' });
    const later = (await r.xadd(key, '*', 'tag', 'later'))!;
    await settled([a], later, 'acked', 5000);
    expect(callsOf([a], 'e1').length).toBe(1);
    expect(text()).not.toMatch(/lost and re-created|had lost this consumer's pending entries/);
    expect(text()).toMatch(/no longer pending/);
    expect(await pendingCount(redis, key)).toBe(0);
  });

  it('a handler that fails after a lease lapse during which a peer took and settled its entry: no retry is recorded, and the entry is not taken back', async () => {
    const { logger, text } = captureLogs();
    const minIdleMs = 1000;
    const a = await startA({ minIdleMs, batchSize: 1, retry: { backoff: { type: 'fixed', delayMs: 60_000 } } }, { logger });
    const key = a.key();
    const r = redis.client();
    let id = '';
    a.recorder.behavior = () => {
      // A peer takes it and settles it. Then the handler, which held the event loop past minIdleMs, fails.
      peerClaimsAndAcks(key, minIdleMs, [id]);
      holdEventLoop(minIdleMs + 2000);
      throw new Error('fails after the lapse');
    };
    id = (await r.xadd(key, '*', 'tag', 'e'))!;
    await settled([a], id, 'failed');
    // Not pending here when it failed: the retry set gets no record a check could take for "nobody tried it since".
    expect(await r.zscore(retrySetKey(key, 'g'), id)).toBeNull();
    await waitFor(() => /failed entry .* is no longer pending: a peer may have settled it/.test(text()), {
      message: 'the owed-entry check to give it up',
    });
    expect(text()).not.toMatch(/taken back/);
    expect(await pendingCount(redis, key)).toBe(0);
    expect(callsOf([a], 'e').length).toBe(1);
  });

  it("reports an entry in hand that was trimmed from the stream as deleted, not as a peer's or a lost group", async () => {
    const { logger, text } = captureLogs();
    const a = await startA({ minIdleMs: 900 }, { logger });
    const { wait, open } = gate();
    a.recorder.behavior = () => wait;
    const id = (await redis.client().xadd(a.key(), '*', 'tag', 'trimmed'))!;
    try {
      await waitFor(() => a.recorder.calls.length === 1, { message: 'the entry in hand' });
      await redis.client().xtrim(a.key(), 'MAXLEN', 0);
      await waitFor(() => a.deleted.includes(id), { message: 'a deleted event' });
    } finally {
      open();
    }
    await settled([a], id);
    const later = (await redis.client().xadd(a.key(), '*', 'tag', 'later'))!;
    await settled([a], later);
    expect(a.deleted).toEqual([id]);
    expect(text()).not.toMatch(/a peer reclaimed|lost and re-created|had lost this consumer's pending entries/);
    expect(callsOf([a], 'trimmed').length).toBe(1);
  });
});
