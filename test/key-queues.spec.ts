/**
 * KeyQueues (consumer/tenure/key-queues.ts), an ordered reader's way to settle, against its interface
 * (accept, nudge, blockFor, settled, blockedKeys) with a unit loop's custody and acks on a real Redis:
 * the entries are pending there, their acks, put-backs and recounts are Redis'. The handler is the
 * test's (`decide`), as are the tenure's answers (may start, paused, ending).
 */
import { KeyQueues, type KeyQueuesDeps } from '../libs/redis-streams/src/consumer/tenure/key-queues.js';
import type { SettledEvent, SettleOutcome } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { groupOnNewStream } from './support/backlog.js';
import { captureLogs } from './support/logs.js';
import { gate } from './support/gate.js';
import { pendingRows } from './support/pending.js';
import { useUnitLoops } from './support/unit-loop.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const loops = useUnitLoops(redis);

/** The test's handler of one entry: its outcome (default acked), decided when it likes. */
type Handler = (entry: StreamEntry) => Promise<SettleOutcome>;

/** `keys[i]` is the partition key of entry i, added to a fresh stream and read by consumer `c` (delivery 1). */
async function pendingOfKeys(...keys: string[]): Promise<StreamEntry[]> {
  const r = redis.client();
  const { key: stream } = await groupOnNewStream(r, 's');
  for (const [i, key] of keys.entries()) await r.xadd(stream, '*', 'n', String(i), 'partitionKey', key);
  const reply = (await r.xreadgroup('GROUP', 'g', 'c', 'STREAMS', stream, '>')) as [string, [string, string[]][]][];
  return reply[0]![1].map(([id, fields]) => ({ stream, id, fields, deliveryCount: 1 }));
}

/** Delivery counts of the stream's pending entries, by id. */
async function countsOf(stream: string): Promise<Map<string, number>> {
  return new Map((await pendingRows(redis, stream)).map(([id, , , count]) => [id, count]));
}

const keyOf = (e: StreamEntry) => e.fields![3]!;

/** Key queues over a unit loop's parts; `running` is how many handlers run now, `log` each start (`<key> <n>`). */
function queuesOf(stream: string, handler: Handler = async () => 'acked', o: Partial<KeyQueuesDeps> = {}) {
  const loop = loops.open({ streams: [stream] });
  const commands = new StreamCommands(loop.lanes.command, 'g');
  const { logger, lines } = captureLogs();
  const tenure = { mayStart: true, paused: false };
  const seen = { running: 0, most: 0, log: [] as string[], againAcked: [] as string[] };
  const decide = async (entry: StreamEntry, source: SettledEvent['source']): Promise<SettledEvent> => {
    seen.log.push(`${keyOf(entry)} ${entry.fields![1]}`);
    seen.most = Math.max(seen.most, ++seen.running);
    try {
      const outcome = await handler(entry);
      return {
        stream,
        id: entry.id,
        deliveryCount: entry.deliveryCount,
        source,
        outcome,
        ...(outcome === 'failed' ? { error: new Error('x') } : {}),
      };
    } finally {
      seen.running--;
    }
  };
  const queues = new KeyQueues({
    ...{ decide, custody: loop.custody, acks: loop.acks, concurrency: 2, room: 100, stop: loop.stop, logger },
    ...{ mayStart: () => tenure.mayStart, paused: () => tenure.paused, ending: () => false, inProgress: new Set() },
    ackAgain: async (entries) => {
      seen.againAcked.push(...entries.map((e) => e.id));
      await commands.ackMany(entries);
    },
    putBack: (entries) => commands.ownership.giveBack(stream, 'c', entries),
    recount: (entries) => commands.recount(stream, 'c', entries),
    ...o,
  });
  return { queues, loop, tenure, seen, lines };
}

const allAcked = (stream: string) => waitFor(async () => (await countsOf(stream)).size === 0, { message: 'every entry acked' });

describe('KeyQueues', () => {
  it("runs one entry per key at a time, in id order, up to `concurrency` keys at once; a key's next starts once its predecessor's ack is confirmed", async () => {
    const entries = await pendingOfKeys('a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c');
    const { stream } = entries[0]!;
    const unacked: string[] = [];
    const byKey = new Map<string, StreamEntry[]>();
    for (const e of entries) byKey.set(keyOf(e), [...(byKey.get(keyOf(e)) ?? []), e]);
    const { queues, seen } = queuesOf(stream, async (entry) => {
      // Its key's earlier entries are acked in Redis by now.
      const before = byKey.get(keyOf(entry))!.filter((e) => e.id < entry.id);
      const pending = await countsOf(stream);
      unacked.push(...before.filter((e) => pending.has(e.id)).map((e) => e.id));
      return 'acked';
    });
    // Two reads: the second's entries arrive while the first's run.
    await queues.accept(entries.slice(0, 4), 'new');
    await queues.accept(entries.slice(4), 'new');
    await allAcked(stream);
    await queues.settled();
    expect(unacked).toEqual([]);
    expect(seen.most).toBe(2);
    for (const key of ['a', 'b', 'c'])
      expect(seen.log.filter((l) => l.startsWith(key))).toEqual(byKey.get(key)!.map((e) => `${key} ${e.fields![1]}`));
    expect(queues.held).toBe(0);
  });

  it('a failed entry blocks its key alone (left pending, its later entries wait); its retry runs first, then what waited', async () => {
    const entries = await pendingOfKeys('a', 'b', 'a', 'b', 'a');
    const { stream } = entries[0]!;
    const failing = entries[0]!;
    let fails = true;
    const { queues, seen, loop } = queuesOf(stream, async (entry) => (entry.id === failing.id && fails ? 'failed' : 'acked'));
    await queues.accept(entries, 'new');
    await waitFor(async () => (await countsOf(stream)).size === 3, { message: "b's entries acked" });
    await queues.settled();
    expect(seen.log).toEqual(['a 0', 'b 1', 'b 3']);
    expect([...(await countsOf(stream)).keys()]).toEqual([entries[0]!.id, entries[2]!.id, entries[4]!.id]);
    expect(queues.blockedKeys()).toEqual([{ key: 'a', id: failing.id, waiting: 2, forMs: expect.any(Number) }]);
    expect(loop.settled.map((e) => [e.id, e.outcome])).toContainEqual([failing.id, 'failed']);
    // Its retry (claimed back when due): it runs, then the key goes on in order.
    fails = false;
    await queues.accept([{ ...failing, deliveryCount: 2 }], 'reclaim');
    await allAcked(stream);
    await queues.settled();
    expect(seen.log.slice(3)).toEqual(['a 0', 'a 2', 'a 4']);
    expect(queues.blockedKeys()).toEqual([]);
  });

  it('a failed entry adopted after a restart (blockFor) holds its key until its retry comes', async () => {
    const entries = await pendingOfKeys('a', 'a', 'b');
    const { stream } = entries[0]!;
    const { queues, seen } = queuesOf(stream);
    queues.blockFor(entries[0]!);
    await queues.accept(entries.slice(1), 'new');
    await waitFor(() => seen.log.includes('b 2'), { message: 'the other key ran' });
    await queues.settled();
    expect(seen.log).toEqual(['b 2']);
    await queues.accept([entries[0]!], 'reclaim');
    await waitFor(() => seen.log.length === 3, { message: 'the key ran once its retry came' });
    expect(seen.log.slice(1)).toEqual(['a 0', 'a 1']);
  });

  it('a re-delivery of an id already queued is not run twice; one of an id it settled is acked again without running', async () => {
    const entries = await pendingOfKeys('a', 'a');
    const { stream } = entries[0]!;
    const first = gate();
    const { queues, seen, lines } = queuesOf(stream, async (entry) => {
      if (entry.id === entries[0]!.id) await first.wait;
      return 'acked';
    });
    await queues.accept(entries, 'new');
    // A reclaim of both while the first runs and the second waits behind it.
    await queues.accept(entries, 'reclaim');
    first.open();
    await allAcked(stream);
    await queues.settled();
    expect(seen.log).toEqual(['a 0', 'a 1']);
    // Delivered again after its ack (the group set back, as a failover that lost the ack): acked, never run.
    await redis.client().xgroup('SETID', stream, 'g', '0');
    await redis.client().xreadgroup('GROUP', 'g', 'c', 'COUNT', 1, 'STREAMS', stream, '>');
    await queues.accept([entries[0]!], 'new');
    await waitFor(() => lines.some((l) => /settled here already came back .*acked without running them again/.test(l)), {
      message: 'acked again',
    });
    expect(seen.againAcked).toEqual([entries[0]!.id]);
    expect(seen.log).toHaveLength(2);
    expect((await countsOf(stream)).size).toBe(0);
  });

  it('a pause starts nothing and puts back the delivery counts of what waits (uncounted); at resume each is counted again as it starts', async () => {
    const entries = await pendingOfKeys('a', 'b', 'a');
    const { stream } = entries[0]!;
    const countsAtStart: number[] = [];
    const { queues, seen, tenure } = queuesOf(stream, async (entry) => {
      countsAtStart.push((await countsOf(stream)).get(entry.id)!);
      return 'acked';
    });
    tenure.paused = true;
    // Paused: the fetch does not wait for room.
    await queues.accept(entries, 'new');
    await waitFor(async () => [...(await countsOf(stream)).values()].every((n) => n === 0), { message: 'the counts put back' });
    expect(seen.log).toEqual([]);
    expect(queues.held).toBe(3);
    tenure.paused = false;
    queues.nudge();
    await allAcked(stream);
    await queues.settled();
    // Counted again as they started: the count they were read with.
    expect(countsAtStart).toEqual([1, 1, 1]);
    expect(seen.log.sort()).toEqual(['a 0', 'a 2', 'b 1']);
  });

  it('an owner that may not start (not owning, its durable acks held) starts nothing until nudged once it may', async () => {
    const entries = await pendingOfKeys('a', 'b');
    const { stream } = entries[0]!;
    const { queues, seen, tenure } = queuesOf(stream);
    tenure.mayStart = false;
    await queues.accept(entries, 'new');
    queues.pump();
    expect(seen.log).toEqual([]);
    tenure.mayStart = true;
    queues.nudge();
    await allAcked(stream);
    expect(seen.log).toEqual(['a 0', 'b 1']);
  });

  it('accept returns once there is room: `room` entries flowing make the fetch wait until one ends its turn', async () => {
    const entries = await pendingOfKeys('a', 'b', 'c');
    const { stream } = entries[0]!;
    const held = gate();
    const handler = async () => {
      await held.wait;
      return 'acked' as const;
    };
    const { queues } = queuesOf(stream, handler, { room: 2, concurrency: 1 });
    let returned = false;
    const accepting = queues.accept(entries, 'new').then(() => (returned = true));
    await waitFor(() => queues.runningCount === 1, { message: 'the first running' });
    expect([returned, queues.held]).toEqual([false, 3]);
    held.open();
    await accepting;
    await allAcked(stream);
  });

  it('once stopped nothing more starts: settled() waits for what runs, what is queued stays (pending in Redis)', async () => {
    const entries = await pendingOfKeys('a', 'a', 'b');
    const { stream } = entries[0]!;
    const first = gate();
    const handler = async (entry: StreamEntry) => {
      if (entry.id === entries[0]!.id) await first.wait;
      return 'acked' as const;
    };
    const { queues, seen, loop } = queuesOf(stream, handler, { concurrency: 1 });
    await queues.accept(entries, 'new');
    loop.stop.stop('stopping');
    first.open();
    await queues.settled();
    expect(seen.log).toEqual(['a 0']);
    expect([...(await countsOf(stream)).keys()]).toEqual([entries[1]!.id, entries[2]!.id]);
    expect(queues.clear().map((e) => e.id)).toEqual([entries[1]!.id, entries[2]!.id]);
  });

  it('an ack Redis failed stops every queue (nothing more starts) and the next accept rejects: the loop restarts, and clear() forgets', async () => {
    const entries = await pendingOfKeys('a', 'a', 'b');
    const { stream } = entries[0]!;
    const { queues, seen, loop } = queuesOf(
      stream,
      async (entry) => {
        // The connection gone while the first is handled: its ack fails.
        if (entry.id === entries[0]!.id) await loop.lanes.close();
        return 'acked';
      },
      { concurrency: 1 },
    );
    await queues.accept(entries, 'new');
    await queues.settled();
    // b's started in the slot while a's ack travelled; a's next never does.
    expect(seen.log).toEqual(['a 0', 'b 2']);
    expect(() => queues.rethrow()).toThrow();
    await expect(queues.accept([], 'new')).rejects.toThrow();
    expect(queues.clear().map((e) => e.id)).toEqual([entries[1]!.id]);
    expect(() => queues.rethrow()).not.toThrow();
  });
});
