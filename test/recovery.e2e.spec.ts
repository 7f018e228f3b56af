import { serverFeatures } from './support/server-features.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingIds, pendingRows } from './support/pending.js';
import { createGroup, groupOnNewStream } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

/** Adds `n` entries and delivers them to `consumer` with a raw XREADGROUP that is never acked. */
async function leavePending(key: string, consumer: string, n: number, group = 'g'): Promise<string[]> {
  const r = redis.client();
  await createGroup(r, key, group);
  for (let i = 0; i < n; i++) await r.xadd(key, '*', 'n', String(i));
  const reply = (await r.xreadgroup('GROUP', group, consumer, 'COUNT', n, 'STREAMS', key, '>')) as [string, [string, string[]][]][];
  return reply[0]![1].map(([id]) => id);
}

/** `consumer` of group `g` on `prefix` (blockMs 100), `options` over those. */
const startAs = (prefix: string, consumer: string, options: Partial<Parameters<typeof start>[0]> = {}) =>
  start({ connection: redis.connection, group: 'g', consumer, keyPrefix: prefix, blockMs: 100, ...options });

/** Waits until the first batch (10) and the read-ahead batch (10) of a self-drain are delivered again (count 2). */
const firstBatchAndReadAhead = (key: string) =>
  waitFor(async () => (await pendingRows(redis, key)).filter(([, , , n]) => n === 2).length === 20, {
    message: 'the first batch and the read-ahead batch delivered',
  });

/** `app`'s handler holds on entry `id` until the returned function is called (the others return at once). */
function holdOn(app: TestApp, id: string): () => void {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  app.recorder.behavior = (call) => (call.id === id ? held : undefined);
  return () => release();
}

describe('recovery of own and peer work', () => {
  it('self-drain: a consumer restarted under the same name settles its own pending entries at once, not after minIdleMs', async () => {
    const prefix = uniquePrefix();
    const ids = await leavePending(`${prefix}orders`, 'C', 25);
    // minIdleMs of ten minutes: only self-drain can deliver these within the test's deadline.
    const app = await startAs(prefix, 'C', { batchSize: 4, minIdleMs: 600_000 });
    await waitFor(() => app.settled.length === 25, { message: '25 drained entries settled' });
    expect(app.recorder.idsOf()).toEqual(ids);
    expect(new Set(app.settled.map((e) => e.source))).toEqual(new Set(['drain']));
    expect(app.recorder.calls.every((c) => c.deliveryCount === 2)).toBe(true);
    expect(await pendingIds(redis, app.key())).toEqual([]);
  });

  it('self-drain reads ahead, and a stop hands the read-ahead batch back (idle minIdleMs, a peer’s at once), never runs or loses it', async () => {
    const prefix = uniquePrefix();
    const ids = await leavePending(`${prefix}orders`, 'C', 50);
    const minIdleMs = 600_000;
    const app = await startAs(prefix, 'C', { batchSize: 10, minIdleMs });
    const release = holdOn(app, ids[0]!);
    // The first batch in hand, and the next read (ids 11–20) already back: both under C.
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the first entry in hand' });
    await firstBatchAndReadAhead(app.key());
    const closing = app.close();
    release();
    await closing;
    expect(app.recorder.idsOf()).toEqual([ids[0]]);
    const rows = await pendingRows(redis, app.key());
    expect(rows.map(([id]) => id)).toEqual(ids.slice(1));
    // Handed back: the rest of the first batch and the whole read-ahead batch, with the idle time that makes them a peer's.
    const handedBack = rows.filter(([, , idle]) => idle >= minIdleMs).map(([id]) => id);
    expect(handedBack).toEqual(ids.slice(1, 20));
  });

  it('a self-drain read-ahead batch waiting past minIdleMs behind a slow batch stays this consumer’s: a peer takes what was never read, not it', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const ids = await leavePending(key, 'C', 40);
    const minIdleMs = 800;
    const c = await startAs(prefix, 'C', { batchSize: 10, minIdleMs });
    const release = holdOn(c, ids[0]!);
    await waitFor(() => c.recorder.calls.length === 1, { message: 'the first drained entry in hand' });
    await firstBatchAndReadAhead(key);
    const b = await startAs(prefix, 'B', { batchSize: 10, minIdleMs });
    // Past minIdleMs B has swept C's PEL: it takes the 20 C never read, and must leave the leased read-ahead batch.
    await waitFor(() => ids.slice(20).every((id) => b.recorder.idsOf().includes(id)), { message: 'B took what C never read' });
    release();
    await waitFor(async () => (await pendingRows(redis, key)).length === 0, { message: 'everything acked' });
    const handled = [...c.recorder.idsOf(), ...b.recorder.idsOf()];
    expect(handled.sort()).toEqual([...ids].sort());
  });

  it('readAhead: false: self-drain reads the next batch only once this one is settled', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const ids = await leavePending(key, 'C', 40);
    const minIdleMs = 800;
    const common = { connection: redis.connection, group: 'g', keyPrefix: prefix, batchSize: 10, blockMs: 100, minIdleMs };
    const c = await start({ ...common, consumer: 'C', readAhead: false });
    const release = holdOn(c, ids[0]!);
    await waitFor(() => c.recorder.calls.length === 1, { message: 'the first drained entry in hand' });
    const b = await start({ ...common, consumer: 'B' });
    // C read nothing past its first batch: B takes the other 30 from C's PEL once idle, each on its second delivery.
    await waitFor(() => ids.slice(10).every((id) => b.recorder.idsOf().includes(id)), { message: 'B took the 30 C did not read' });
    expect(b.recorder.calls.filter((call) => ids.slice(10).includes(call.id)).map((call) => call.deliveryCount)).toEqual(
      ids.slice(10).map(() => 2),
    );
    release();
    await waitFor(async () => (await pendingRows(redis, key)).length === 0, { message: 'everything acked' });
  });

  it('self-drain moves past entries whose handler fails instead of re-reading them forever', async () => {
    const prefix = uniquePrefix();
    const ids = await leavePending(`${prefix}orders`, 'C', 5);
    const app = await startAs(prefix, 'C', { batchSize: 2, minIdleMs: 600_000 });
    app.recorder.behavior = (call) => {
      if (call.id === ids[1]) throw new Error('poison');
    };
    await waitFor(() => app.settled.length === 5, { message: 'five settled entries' });
    expect(app.recorder.idsOf()).toEqual(ids);
    expect(await pendingIds(redis, app.key())).toEqual([ids[1]]);
  });

  it('peer reclaim: entries pending under a dead consumer are taken over after minIdleMs, not before', async () => {
    const prefix = uniquePrefix();
    const minIdleMs = 1000;
    const deliveredBefore = Date.now();
    const ids = await leavePending(`${prefix}orders`, 'dead', 6);
    const app = await startAs(prefix, 'live', { blockMs: 50, minIdleMs });
    const handledAt: number[] = [];
    app.recorder.behavior = () => void handledAt.push(Date.now());
    await waitFor(() => app.settled.length === 6, { message: 'six reclaimed entries settled' });
    // Redis decides idleness with its own clock, which it caches per event-loop turn (a few ms
    // behind under load); the host clock only bounds it from below, hence the small slack.
    expect(Math.min(...handledAt) - deliveredBefore).toBeGreaterThanOrEqual(minIdleMs - 50);
    expect(app.recorder.idsOf()).toEqual(ids);
    expect(app.recorder.calls.every((c) => c.deliveryCount === 2 && c.consumer === 'live')).toBe(true);
    expect(new Set(app.settled.map((e) => e.source))).toEqual(new Set(['reclaim']));
    expect(await pendingIds(redis, app.key())).toEqual([]);
  });

  it('reclaim carries the XAUTOCLAIM cursor, so idle entries behind a wall of live ones are still found', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const r = redis.client();
    // 200 entries of a live peer (kept fresh below), then 3 of a dead one, all in one PEL.
    const all = await leavePending(key, 'dead', 203);
    const wall = all.slice(0, 200);
    const behind = all.slice(200);
    const refresh = () => r.xclaim(key, 'g', 'live-peer', 0, ...wall, 'JUSTID');
    await refresh();
    const keeper = setInterval(() => void refresh().catch(() => {}), 50);
    try {
      // COUNT 2 scans ~20 PEL entries per call: restarting at 0-0 each time would never pass the wall.
      const app = await startAs(prefix, 'sweeper', { batchSize: 2, blockMs: 20, minIdleMs: 1000 });
      await waitFor(() => behind.every((id) => app.recorder.idsOf().includes(id)), { message: 'the entries behind the wall' });
      expect(await pendingIds(redis, key, { consumer: 'dead' })).toEqual([]);
    } finally {
      clearInterval(keeper);
    }
  });

  it('does not steal live work: a handler running past 3x minIdleMs is not re-run by a beating peer', async (ctx) => {
    if (!redis.owned) ctx.skip(); // counts reclaim calls server-wide
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r);
    // Ten renewals per minIdleMs: only a lease not renewed at all lets the peer take the entries, not a
    // renewal a busy machine delayed (with 300 ms and renewals every 100 ms, a 200 ms delay would have).
    const minIdleMs = 1_000;
    const leaseRenewMs = 100;
    const slow = await startAs(prefix, 'slow', { blockMs: 50, minIdleMs, leaseRenewMs });
    let release!: () => void;
    // Set before the entries exist (CI saw the first handled, and acked, before a later assignment).
    slow.recorder.behavior = (call) =>
      (call.payload as { n?: string }).n === '1' ? new Promise<void>((resolve) => (release = resolve)) : undefined;
    // One transaction: the park wakes once both exist, and reads them as one batch.
    const [first, second] = (await r.multi().xadd(key, '*', 'n', '1').xadd(key, '*', 'n', '2').exec())!.map(([, id]) => id as string);
    await waitFor(() => slow.recorder.calls.length === 1, { message: 'the slow handler to start' });

    // Where the park's read claims (XREADGROUP … CLAIM), each of the peer's reads is a reclaim; else its XAUTOCLAIMs, one per stream.
    const { claimOnRead } = await serverFeatures(redis);
    const [command, perBeat] = claimOnRead ? ['xreadgroup', 1] : ['xautoclaim', 2];
    const reclaims = async () => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(await r.info('commandstats'))?.[1] ?? 0);
    const before = await reclaims();
    const peer = await startAs(prefix, 'peer', { blockMs: 50, minIdleMs });
    const peerUp = Date.now();
    // The first entry is in hand and the second waits behind it in the same batch. The slow
    // consumer does not beat while its batch is in hand, so every reclaim now is the peer's:
    // per beat one XAUTOCLAIM per stream it reads (orders, payments), or its one read. Past 3x minIdleMs, and twenty beats.
    await waitFor(async () => Date.now() - peerUp > 3 * minIdleMs && (await reclaims()) - before >= perBeat * 20, {
      message: 'twenty reclaim beats of the peer, past 3x minIdleMs',
      timeoutMs: 3 * minIdleMs + 15_000,
    });
    // The lease kept both fresh all along: neither was ever idle long enough to be taken.
    const idle = ((await r.xpending(key, 'g', '-', '+', 10)) as [string, string, number][]).map(([id, owner, idleMs]) => [
      id,
      owner,
      idleMs < minIdleMs,
    ]);
    expect(idle).toEqual([
      [first, 'slow', true],
      [second, 'slow', true],
    ]);
    release();
    await waitFor(() => slow.settled.filter((e) => e.outcome === 'acked').length === 2, {
      message: 'both entries acked by the slow consumer',
    });

    expect(peer.recorder.calls).toEqual([]);
    expect(slow.recorder.calls.map((c) => [c.id, c.deliveryCount])).toEqual([
      [first, 1],
      [second, 1],
    ]);
    expect(await pendingIds(redis, key)).toEqual([]);
  });
});

describe('entries trimmed while pending', () => {
  it('reports them as deleted, from self-drain and from reclaim, and never dispatches them', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const own = await leavePending(key, 'C', 3);
    const r = redis.client();
    const peerId = (await r.xadd(key, '*', 'n', 'peer'))!;
    await r.xreadgroup('GROUP', 'g', 'dead', 'STREAMS', key, '>');
    // Trim one of our own pending entries and the dead peer's one out of the stream.
    await r.xdel(key, own[1]!, peerId);
    const app = await startAs(prefix, 'C', { blockMs: 50, minIdleMs: 300 });
    await waitFor(() => app.deleted.length === 2 && app.settled.length === 2, {
      message: 'two deletions reported and two entries settled',
    });
    expect([...app.deleted].sort()).toEqual([own[1], peerId].sort());
    expect(app.recorder.idsOf()).toEqual([own[0], own[2]]);
    expect(await pendingIds(redis, key)).toEqual([]);
  });
});
