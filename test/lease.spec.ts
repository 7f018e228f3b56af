/** The lease against a real Redis: renewal, what it calls lost, and hand-backs (bookkeeping alone: lease-counts.spec.ts). */
import { Lease } from '../libs/redis-streams/src/consumer/custody/lease.js';
import { markSettleSent } from '../libs/redis-streams/src/consumer/settle/settle-sent.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { createGroup } from './support/backlog.js';
import { pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const HOUR = 3_600_000;

/** `n` entries delivered to consumer c and not acked, idle for an hour. */
async function heldByC(key: string, n: number): Promise<StreamEntry[]> {
  const r = redis.client();
  await createGroup(r, key);
  for (let i = 0; i < n; i++) await r.xadd(key, '*', 'n', String(i));
  await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', n, 'STREAMS', key, '>');
  const ids = (await pendingRows(redis, key)).map(([id]) => id);
  await r.xclaim(key, 'g', 'c', 0, ...ids, 'IDLE', HOUR, 'JUSTID');
  return ids.map((id) => ({ stream: key, id, fields: ['n', '0'], deliveryCount: 1 }));
}

function logger() {
  const warnings: string[] = [];
  return { warnings, log: () => {}, warn: (m: string) => void warnings.push(m), error: () => {} };
}

const idleOf = async (key: string) => new Map((await pendingRows(redis, key)).map(([id, consumer, idle]) => [id, { consumer, idle }]));

describe('Lease: renewal', () => {
  it('a renewal that fails after clear() (its reader restarted or ended) is not reported: nothing is logged after close()', async () => {
    const key = `${uniquePrefix()}orders`;
    const [entry] = await heldByC(key, 1);
    const log = logger();
    const conn = redis.newClient();
    const admin = redis.client();
    const lease = new Lease(new StreamCommands(conn, 'g'), 'c', 20, log);
    lease.hold([entry!], performance.now());
    // Writes paused: the next renewal (a script) waits at the server, as on a frozen Redis at close().
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    const renewing = lease.renewals$.subscribe();
    try {
      // Sent and unanswered: ioredis keeps it in its queue of commands awaiting a reply.
      await waitFor(() => (conn as unknown as { commandQueue: { length: number } }).commandQueue.length > 0, {
        message: 'a renewal waiting at the server',
      });
      lease.clear();
      renewing.unsubscribe();
      // The connection closed under it (close()'s QUIT): the renewal fails after its reader ended.
      conn.disconnect();
      await waitFor(() => conn.status === 'end', { message: 'the connection closed' });
      await new Promise((resolve) => setImmediate(resolve));
      expect(log.warnings).toEqual([]);
    } finally {
      renewing.unsubscribe();
      await admin.call('CLIENT', 'UNPAUSE');
    }
  });

  it('resets the idle time of what it holds, and reports as lost only what a peer took that this consumer had not settled', async () => {
    const key = `${uniquePrefix()}orders`;
    const [taken, acking, deadLettering, kept] = await heldByC(key, 4);
    const lost: { stream: string; ids: string[] }[] = [];
    const log = logger();
    const lease = new Lease(new StreamCommands(redis.client(), 'g'), 'c', 20, log, (stream, l) =>
      lost.push({ stream, ids: l.map(({ entry }) => entry.id) }),
    );
    lease.hold([taken!, acking!, deadLettering!, kept!], performance.now());
    // A peer took three of them; two of those this consumer had settled already (its ack, its dead-letter move, sent).
    await redis.client().xclaim(key, 'g', 'peer', 0, taken!.id, acking!.id, deadLettering!.id, 'JUSTID');
    lease.ackSent([acking!]);
    markSettleSent(deadLettering!);
    const renewing = lease.renewals$.subscribe();
    try {
      await waitFor(() => lost.length > 0, { message: 'a renewal that finds the lost entry' });
      expect(lost[0]).toEqual({ stream: key, ids: [taken!.id] });
      await waitFor(async () => (await idleOf(key)).get(kept!.id)!.idle < HOUR, { message: 'the kept entry renewed' });
      // The peer's entries stay the peer's: a renewal never takes an entry back.
      const rows = await idleOf(key);
      expect([taken, acking, deadLettering].map((e) => rows.get(e!.id)!.consumer)).toEqual(['peer', 'peer', 'peer']);
      expect(log.warnings).toEqual([]);
    } finally {
      renewing.unsubscribe();
    }
  });

  it('an entry a renewal finds gone keeps the time it was last confirmed: renewing the rest of its fetch does not make it look ours (a CI run of fair.e2e)', async () => {
    const key = `${uniquePrefix()}orders`;
    const [taken, kept] = await heldByC(key, 2);
    const log = logger();
    let seen: { takenAt: number | undefined; reported: number; keptAt: number | undefined } | undefined;
    const lease: Lease = new Lease(new StreamCommands(redis.client(), 'g'), 'c', 20, log, (_, l) => {
      seen ??= { takenAt: lease.confirmedAt(taken!), reported: l[0]!.confirmedAt, keptAt: lease.confirmedAt(kept!) };
    });
    // One fetch: one holding for both.
    lease.hold([taken!, kept!], performance.now());
    const heldAt = lease.confirmedAt(taken!)!;
    await redis.client().xclaim(key, 'g', 'peer', 0, taken!.id, 'JUSTID');
    const renewing = lease.renewals$.subscribe();
    try {
      await waitFor(() => seen !== undefined, { message: 'a renewal that finds the lost entry' });
      expect(seen!.keptAt).toBeGreaterThan(heldAt);
      expect(seen!.reported).toBe(heldAt);
      // Until the audit says whose it is, the lost entry is not confirmed ours any later than it was.
      expect(seen!.takenAt).toBe(heldAt);
    } finally {
      renewing.unsubscribe();
    }
  });

  it('a renewal Redis refuses is logged, and the other streams are still renewed', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const [entry] = await heldByC(key, 1);
    const wrong = `${prefix}not-a-stream`;
    await redis.client().set(wrong, 'x');
    const log = logger();
    const lease = new Lease(new StreamCommands(redis.client(), 'g'), 'c', 20, log);
    lease.hold([{ stream: wrong, id: '1-0', fields: [], deliveryCount: 1 }], performance.now());
    lease.hold([entry!], performance.now());
    const renewing = lease.renewals$.subscribe();
    try {
      await waitFor(async () => (await idleOf(key)).get(entry!.id)!.idle < HOUR, { message: 'the good stream renewed' });
      expect(log.warnings[0]).toMatch(new RegExp(`^lease renewal on "${wrong}" failed: .*WRONGTYPE`));
    } finally {
      renewing.unsubscribe();
    }
  });
});

describe('Lease: hand-back', () => {
  it('drops the entries and makes them idle by minIdleMs, so a peer’s next reclaim takes them at once', async () => {
    const key = `${uniquePrefix()}orders`;
    const entries = await heldByC(key, 3);
    await redis.client().xclaim(key, 'g', 'c', 0, ...entries.map((e) => e.id), 'IDLE', 0, 'JUSTID');
    const lease = new Lease(new StreamCommands(redis.client(), 'g'), 'c', 60_000, logger());
    lease.hold(entries, performance.now());
    await lease.handBack(entries.slice(0, 2), 30_000);
    expect(lease.entries()).toEqual([{ stream: key, id: entries[2]!.id }]);
    const [, claimed] = (await redis.client().xautoclaim(key, 'g', 'peer', 30_000, '0-0', 'COUNT', 10, 'JUSTID')) as [string, string[]];
    expect(claimed).toEqual(entries.slice(0, 2).map((e) => e.id));
  });

  it('handBackIds: true when Redis confirmed every stream; false, with a warning, for a stream it refused (the others still handed back)', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const entries = await heldByC(key, 2);
    await redis.client().xclaim(key, 'g', 'c', 0, ...entries.map((e) => e.id), 'IDLE', 0, 'JUSTID');
    const wrong = `${prefix}not-a-stream`;
    await redis.client().set(wrong, 'x');
    const log = logger();
    const lease = new Lease(new StreamCommands(redis.client(), 'g'), 'c', 60_000, log);
    const ids = entries.map((e) => e.id);
    expect(await lease.handBackIds(new Map([[key, ids]]), 30_000)).toBe(true);
    expect(log.warnings).toEqual([]);
    await redis.client().xclaim(key, 'g', 'c', 0, ...ids, 'IDLE', 0, 'JUSTID');
    expect(
      await lease.handBackIds(
        new Map([
          [wrong, ['1-0']],
          [key, ids],
        ]),
        30_000,
      ),
    ).toBe(false);
    expect(log.warnings).toEqual([expect.stringMatching(new RegExp(`^could not hand back 1 entry of "${wrong}": .*WRONGTYPE`))]);
    expect([...(await idleOf(key)).values()].every(({ idle }) => idle >= 30_000)).toBe(true);
  });
});
