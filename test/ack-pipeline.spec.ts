/** The ack pipeline against a real Redis: one XACK in flight at most, the lease kept until it is confirmed, failures reported by the next step. */
import { AckPipeline } from '../libs/redis-streams/src/consumer/settle/ack-pipeline.js';
import { Lease } from '../libs/redis-streams/src/consumer/custody/lease.js';
import type { SettledEvent } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import { StreamCommands, type ShortAck } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { createGroup } from './support/backlog.js';
import { pendingIds } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const quiet = { log: () => {}, warn: () => {}, error: () => {} };

/** `n` entries of `key` delivered to consumer c (group g) and not acked, as the loop holds them. */
async function delivered(key: string, n: number): Promise<StreamEntry[]> {
  const r = redis.client();
  await createGroup(r, key);
  for (let i = 0; i < n; i++) await r.xadd(key, '*', 'n', String(i));
  await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', n, 'STREAMS', key, '>');
  return (await pendingIds(redis, key)).map((id) => ({ stream: key, id, fields: ['n', '0'], deliveryCount: 1 }));
}

const acked = (e: StreamEntry): SettledEvent => ({ stream: e.stream, id: e.id, outcome: 'acked', deliveryCount: 1, source: 'new' });

/** StreamCommands whose acks are logged as they start and end (the real XACK in between). */
class LoggedCommands extends StreamCommands {
  readonly log: string[] = [];
  override async ackMany(entries: readonly StreamEntry[]): Promise<ShortAck[]> {
    const name = entries.map((e) => e.id).join(',');
    this.log.push(`start ${name}`);
    try {
      return await super.ackMany(entries);
    } finally {
      this.log.push(`end ${name}`);
    }
  }
}

function pipeline() {
  const commands = new LoggedCommands(redis.client(), 'g');
  const lease = new Lease(commands, 'c', 60_000, quiet);
  const settled: SettledEvent[] = [];
  const short: [string, string[], number][] = [];
  let failures = 0;
  const acks = new AckPipeline(
    (entries) => commands.ackMany(entries),
    {
      ackSent: (entries) => lease.ackSent(entries),
      ackConfirmed: (entries) => lease.ackConfirmed(entries),
      release: (entry) => lease.drop(entry),
      settled: (e) => void settled.push(e),
    },
    {
      shortAck: (stream, entries, missing) => void short.push([stream, entries.map((e) => e.id), missing]),
      ackFailedNow: () => void failures++,
    },
  );
  return { acks, lease, commands, settled, short, failures: () => failures };
}

describe('AckPipeline', () => {
  it('send() returns once the XACK is sent: the entries stay leased and unreported until Redis confirms it', async () => {
    const key = `${uniquePrefix()}orders`;
    const entries = await delivered(key, 3);
    const p = pipeline();
    p.lease.hold(entries, performance.now());
    await p.acks.send(entries, entries.map(acked));
    expect(p.settled).toEqual([]);
    expect(p.lease.counts().get(key)).toBe(3);
    // While in flight, a renewal must not call them lost: the lease knows their settle is sent.
    expect(p.lease.withoutSettling(entries.map((entry) => ({ entry })))).toEqual([]);
    await p.acks.flush();
    expect(p.settled.map((e) => e.id)).toEqual(entries.map((e) => e.id));
    expect(p.lease.counts().get(key) ?? 0).toBe(0);
    expect(await pendingIds(redis, key)).toEqual([]);
  });

  it('one ack in flight at most: the next batch’s XACK waits for the previous answer; batches are reported in order', async () => {
    const key = `${uniquePrefix()}orders`;
    const [a, b, c] = await delivered(key, 3);
    const p = pipeline();
    p.lease.hold([a!, b!, c!], performance.now());
    await p.acks.send([a!], [acked(a!)]);
    await p.acks.send([b!, c!], [acked(b!), acked(c!)]);
    await p.acks.flush();
    const [first, second] = [a!.id, `${b!.id},${c!.id}`];
    expect(p.commands.log).toEqual([`start ${first}`, `end ${first}`, `start ${second}`, `end ${second}`]);
    expect(p.settled.map((e) => e.id)).toEqual([a!.id, b!.id, c!.id]);
    expect(await pendingIds(redis, key)).toEqual([]);
  });

  it('an ack that finds entries no longer pending reports how many, per stream, and still settles them', async () => {
    const prefix = uniquePrefix();
    const [s, t] = [`${prefix}s`, `${prefix}t`];
    const onS = await delivered(s, 2);
    const onT = await delivered(t, 2);
    // An operator acked one of s by hand.
    await redis.client().xack(s, 'g', onS[0]!.id);
    const p = pipeline();
    const all = [...onS, ...onT];
    p.lease.hold(all, performance.now());
    await p.acks.send(all, all.map(acked));
    await p.acks.flush();
    expect(p.short).toEqual([[s, onS.map((e) => e.id), 1]]);
    expect(p.settled).toHaveLength(4);
    expect(p.lease.entries()).toEqual([]);
  });

  it('a failed ack: told at once, its entries stay leased and pending, and the next send rejects with it (once)', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const entries = await delivered(key, 1);
    // A key that is no stream: Redis answers XACK with WRONGTYPE.
    const wrong = `${prefix}not-a-stream`;
    await redis.client().set(wrong, 'x');
    const bad: StreamEntry = { stream: wrong, id: '1-0', fields: [], deliveryCount: 1 };
    const p = pipeline();
    p.lease.hold([bad], performance.now());
    await p.acks.send([bad], [acked(bad)]);
    await vi.waitFor(() => expect(p.failures()).toBe(1));
    expect(p.settled).toEqual([]);
    expect(p.lease.counts().get(wrong)).toBe(1);
    p.lease.hold(entries, performance.now());
    await expect(p.acks.send(entries, entries.map(acked))).rejects.toThrow(/WRONGTYPE/);
    // The failed send sent nothing of its own.
    expect(p.commands.log).toEqual([`start 1-0`, `end 1-0`]);
    expect(await pendingIds(redis, key)).toEqual(entries.map((e) => e.id));
    // Reported once: the pipeline is clear again.
    await expect(p.acks.flush()).resolves.toBeUndefined();
    await p.acks.send(entries, entries.map(acked));
    await p.acks.flush();
    expect(p.settled.map((e) => e.id)).toEqual(entries.map((e) => e.id));
  });

  it('an ack that throws as it is sent fails as one Redis refused: told at once, send() returns, the next flush rejects with it', async () => {
    // The ack step is a plain function (no async frame, review of issue 52): a synchronous throw must not escape send().
    const entries = await delivered(`${uniquePrefix()}orders`, 2);
    let failures = 0;
    const acks = new AckPipeline(
      () => {
        throw new Error('ack could not be sent');
      },
      { ackSent: () => {}, ackConfirmed: () => {}, release: () => {}, settled: () => {} },
      { shortAck: () => {}, ackFailedNow: () => void failures++ },
    );
    await expect(acks.send(entries, entries.map(acked))).resolves.toBeUndefined();
    await vi.waitFor(() => expect(failures).toBe(1));
    await expect(acks.flush()).rejects.toThrow('ack could not be sent');
    await expect(acks.flush()).resolves.toBeUndefined();
  });
});
