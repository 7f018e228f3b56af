/**
 * PartitionOwner (consumer/tenure/partition-owner.ts) against its interface on a real Redis: the
 * share-out among the group's live members, the epoch that fences, a renewal that keeps the lease,
 * being asked to release, losing it, and an owner that stops starting once its lease ran out here.
 * What a renewal answered late, a stall and a frozen Redis do: partition-owner.e2e.
 */
import type { Subscription } from 'rxjs';
import { PartitionOwner } from '../libs/redis-streams/src/consumer/tenure/partition-owner.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { groupOnNewStream } from './support/backlog.js';
import { captureLogs } from './support/logs.js';
import { pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const renewing: Subscription[] = [];
afterEach(() => {
  for (const s of renewing.splice(0)) s.unsubscribe();
});

/** Member `consumer`'s owner of partition `partition` of `stream` (each member a connection of its own); a minute's lease unless `ttlMs`. */
function memberOf(stream: string, consumer: string, partition = 0, ttlMs = 60_000) {
  const { logger, lines } = captureLogs();
  const commands = new StreamCommands(redis.newClient(), 'g');
  const told = { changes: 0 };
  const ordered = { pattern: 'orders', partition, partitions: 2 };
  const o = new PartitionOwner({
    ...{ ownership: commands.ownership, stream, ordered, consumer, ttlMs, beatMs: 50, logger },
    onChange: () => told.changes++,
  });
  return { o, lines, told, ownerKey: commands.ownership.keys(stream).owner };
}

const stateOf = (o: PartitionOwner) => ({ owned: o.owned, valid: o.valid(), holds: o.holds(), ending: o.ending });

describe('PartitionOwner', () => {
  it('the first member takes a free partition with a new epoch, its owner value the fence; a member that joins stands by while the share-out leaves it to the owner', async () => {
    const stream = `${uniquePrefix()}s`;
    const a = memberOf(stream, 'a');
    const b = memberOf(stream, 'b');
    expect(stateOf(a.o)).toEqual({ owned: false, valid: false, holds: false, ending: true });
    expect(await a.o.beat()).toBe(true);
    expect(stateOf(a.o)).toEqual({ owned: true, valid: true, holds: true, ending: false });
    expect(a.o.fence).toMatch(/^1 [0-9a-f]{8} a$/);
    expect(await redis.client().get(a.ownerKey)).toBe(a.o.fence);
    // Partition 0 of members [a, b] is a's: b stands by.
    expect(await b.o.beat()).toBe(false);
    expect(b.o.view()).toEqual({ stream, pattern: 'orders', partition: 0, owned: false, epoch: 0, owner: a.o.fence, members: 2 });
    expect(await a.o.beat()).toBe(true);
    expect(a.o.view()).toMatchObject({ owned: true, epoch: 1, members: 2 });
    expect(a.told.changes).toBe(0);
  });

  it('an owner the share-out no longer wants is asked to release: it starts nothing more but its commands are still its own; once released, the wanted member takes it with the next epoch', async () => {
    const stream = `${uniquePrefix()}s`;
    // Partition 1 of members [a, b] is b's, but a owned it alone first.
    const a = memberOf(stream, 'a', 1);
    const b = memberOf(stream, 'b', 1);
    expect(await a.o.beat()).toBe(true);
    expect(await b.o.beat()).toBe(false);
    expect(await a.o.beat()).toBe(true);
    expect(stateOf(a.o)).toEqual({ owned: true, valid: false, holds: true, ending: true });
    expect(a.told.changes).toBe(1);
    const was = a.o.fence;
    await a.o.release(false);
    expect([a.o.owned, a.o.fence]).toEqual([false, '']);
    expect(a.lines).toContain(`log released "${stream}" (epoch 1)`);
    expect(await b.o.beat()).toBe(true);
    expect(b.o.fence).toMatch(/^2 [0-9a-f]{8} b$/);
    expect(b.o.fence).not.toBe(was);
  });

  it('release(true) leaves the share-out too: the members left count without it', async () => {
    const stream = `${uniquePrefix()}s`;
    const a = memberOf(stream, 'a');
    const b = memberOf(stream, 'b');
    await a.o.beat();
    await b.o.beat();
    await a.o.release(true);
    expect(await b.o.beat()).toBe(true);
    expect(b.o.view().members).toBe(1);
  });

  it('renewals keep the lease past its ttl while owned; an owner value changed behind it is a loss, told once', async () => {
    const stream = `${uniquePrefix()}s`;
    const a = memberOf(stream, 'a', 0, 600);
    await a.o.beat();
    const fence = a.o.fence;
    let renewals = 0;
    renewing.push(a.o.renewals$.subscribe(() => renewals++));
    // 20 renewals of 50 ms: past the 600 ms ttl, still owned with the same value.
    await waitFor(() => renewals >= 20, { message: 'twenty renewals' });
    expect([a.o.valid(), a.o.fence, await redis.client().get(a.ownerKey)]).toEqual([true, fence, fence]);
    await redis.client().set(a.ownerKey, '9 feedf00d z', 'PX', 60_000);
    await waitFor(() => !a.o.owned, { message: 'the loss seen by a renewal' });
    expect(a.told.changes).toBe(1);
    expect(a.lines.filter((l) => l.startsWith('warn'))).toEqual([
      `warn lost ownership of "${stream}" (epoch 1) to "9 feedf00d z": its handlings stop at the next settle point`,
    ]);
  });

  it("an owner that is not renewed stops starting (valid, holds) once its lease ran out by this process' clock, before Redis' runs out and a peer takes it", async () => {
    const stream = `${uniquePrefix()}s`;
    const a = memberOf(stream, 'a', 0, 300);
    await a.o.beat();
    // By the time Redis' lease is gone (a peer may take it), this owner has stopped by its own clock.
    await waitFor(async () => (await redis.client().exists(a.ownerKey)) === 0, { message: 'the key run out on Redis' });
    expect(stateOf(a.o)).toEqual({ owned: true, valid: false, holds: false, ending: true });
    expect(await memberOf(stream, 'b').o.beat()).toBe(true);
  });

  it("takeOver makes every pending entry of the group this consumer's, its delivery not counted; giveBack puts back the count its read added", async () => {
    const r = redis.client();
    const { key: stream } = await groupOnNewStream(r, 's');
    for (let i = 0; i < 3; i++) await r.xadd(stream, '*', 'n', String(i));
    await r.xreadgroup('GROUP', 'g', 'old', 'STREAMS', stream, '>');
    const a = memberOf(stream, 'a');
    await a.o.beat();
    expect(await a.o.takeOver()).toBe(3);
    const rows = await pendingRows(redis, stream);
    expect(rows.map(([, consumer, , count]) => [consumer, count])).toEqual([
      ['a', 1],
      ['a', 1],
      ['a', 1],
    ]);
    // Read again here (self-drain: a delivery counted), then given back unstarted: the count before that read.
    await r.xreadgroup('GROUP', 'g', 'a', 'STREAMS', stream, '0');
    await a.o.giveBack(rows.map(([id]) => ({ stream, id, fields: null, deliveryCount: 2 })));
    const after = await pendingRows(redis, stream);
    expect(after.map(([, , , count]) => count)).toEqual([1, 1, 1]);
  });
});
