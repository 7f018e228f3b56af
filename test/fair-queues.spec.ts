/**
 * FairQueues (consumer/settle/fair-queues.ts), a fair pattern's way to settle, against its interface (accept,
 * settled, nudge, held) with a unit loop's custody and acks and the key slots' commands on a real Redis: the
 * entries are pending there, and Redis decides the slots. The handler is the test's (`decide`).
 */
import { FairQueues, type FairQueuesDeps } from '../libs/redis-streams/src/consumer/settle/fair-queues.js';
import type { SettledEvent } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import { KeySlotCommands } from '../libs/redis-streams/src/redis/settle/key-slot-commands.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { groupOnNewStream } from './support/backlog.js';
import { captureLogs } from './support/logs.js';
import { pendingRows } from './support/pending.js';
import { useUnitLoops } from './support/unit-loop.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const loops = useUnitLoops(redis);

/** `keys[i]` is the partition key of entry i ('' for none), added to a fresh stream and read by consumer `c`. */
async function pendingOfKeys(keys: readonly string[]): Promise<StreamEntry[]> {
  const r = redis.client();
  const { key: stream } = await groupOnNewStream(r, 's');
  const tx = r.multi();
  for (const [i, key] of keys.entries()) tx.xadd(stream, '*', 'n', String(i), ...(key ? ['partitionKey', key] : []));
  await tx.exec();
  const reply = (await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', keys.length, 'STREAMS', stream, '>')) as [string, [string, string[]][]][];
  return reply[0]![1].map(([id, fields]) => ({ stream, id, fields, deliveryCount: 1 }));
}

const keyOf = (e: StreamEntry): string => e.fields![3] ?? '';

/** Fair queues over a unit loop's parts; `log` is each start (`<key> <n>`), `most` the most of one key running at once. */
function queuesOf(stream: string, o: Partial<FairQueuesDeps> & { hold?: (entry: StreamEntry) => Promise<void> } = {}) {
  const loop = loops.open({ streams: [stream] });
  const commands = new StreamCommands(loop.lanes.command, 'g');
  const slots = new KeySlotCommands(loop.lanes.command, 'g', false);
  const name = `${stream}:fair`;
  const { logger, lines } = captureLogs();
  const seen = { log: [] as string[], running: new Map<string, number>(), most: new Map<string, number>() };
  const decide = async (entry: StreamEntry, source: SettledEvent['source']): Promise<SettledEvent> => {
    const key = keyOf(entry);
    seen.log.push(`${key} ${entry.fields![1]}`);
    seen.running.set(key, (seen.running.get(key) ?? 0) + 1);
    seen.most.set(key, Math.max(seen.most.get(key) ?? 0, seen.running.get(key)!));
    try {
      await o.hold?.(entry);
      return { stream, id: entry.id, deliveryCount: entry.deliveryCount, source, outcome: 'acked' };
    } finally {
      seen.running.set(key, seen.running.get(key)! - 1);
    }
  };
  const queues = new FairQueues({
    ...{ pattern: 's', slotKeys: `${name}*`, decide, custody: loop.custody, acks: loop.acks, concurrency: 1, inHand: 1, stop: loop.stop },
    keysOf: (entries) => entries.map((e) => keyOf(e) || undefined),
    slots: {
      slotKeyOf: (key) => slots.slotKeyOf(name, key),
      exchange: (give, take) => slots.exchange(give, take, o.inHand ?? 1, 10_000),
      keep: (s) => slots.keep(s, 10_000),
    },
    ...{ inProgress: new Set(), barred: () => false, handBackIdleMs: 10_000, logger },
    putBack: async (entries, idleMs) => void (await commands.putBack(stream, 'c', entries, idleMs)),
    recount: (entries) => commands.recount(stream, 'c', entries),
    staleAfterMs: 5_000,
    ...o,
  });
  // The entries are this consumer's as a fetch step leaves them: delivered here, and held by the lease.
  const accept = (entries: readonly StreamEntry[]) => {
    loop.custody.received(entries, performance.now());
    return queues.accept(entries, 'new');
  };
  return { queues, accept, seen, lines, slots, name };
}

const allAcked = (stream: string) => waitFor(async () => (await pendingRows(redis, stream)).length === 0, { message: 'every entry acked' });

describe('FairQueues', () => {
  it('serves the keys round-robin, one entry a turn: a key with a backlog takes its turn like the others', async () => {
    const entries = await pendingOfKeys(['a', 'a', 'a', 'a', 'a', 'b', 'b', 'c', 'c']);
    const { stream } = entries[0]!;
    const { queues, accept, seen } = queuesOf(stream);
    await accept(entries);
    await allAcked(stream);
    await queues.settled();
    expect(seen.log).toEqual(['a 0', 'b 5', 'c 7', 'a 1', 'b 6', 'c 8', 'a 2', 'a 3', 'a 4']);
    expect(queues.held).toBe(0);
  });

  it('never runs more than inHand of one key, however many handlers are free; other keys fill them', async () => {
    const entries = await pendingOfKeys([...Array.from({ length: 20 }, () => 'a'), ...Array.from({ length: 6 }, () => 'b')]);
    const { stream } = entries[0]!;
    // The first handlers hold until both keys are at their bound (a condition, not a time); then all run through.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { queues, accept, seen } = queuesOf(stream, { concurrency: 8, inHand: 2, hold: () => held });
    await accept(entries);
    await waitFor(() => seen.running.get('a') === 2 && seen.running.get('b') === 2, { message: 'both keys at their inHand' });
    release();
    await allAcked(stream);
    await queues.settled();
    expect(seen.most.get('a')).toBe(2);
    expect(seen.most.get('b')).toBe(2);
    expect(seen.log).toHaveLength(26);
  });

  it('a key whose inHand another worker holds waits (Redis refused its slot) while the other keys run; it runs once they are given back', async () => {
    const entries = await pendingOfKeys(['a', 'b', 'a', 'b']);
    const { stream } = entries[0]!;
    const { accept, seen, slots, name } = queuesOf(stream, { concurrency: 2 });
    // Another worker holds key a's one slot.
    const other = { key: 'a', slotKey: slots.slotKeyOf(name, 'a'), member: 'other\n1-0' };
    expect(await slots.exchange([], [other], 1, 10_000)).toEqual([true]);
    await accept(entries);
    await waitFor(() => seen.log.length === 2, { message: "b's two entries run" });
    expect(seen.log).toEqual(['b 1', 'b 3']);
    await slots.exchange([other], [], 1, 10_000);
    await allAcked(stream);
    expect(seen.log.slice(2)).toEqual(['a 0', 'a 2']);
  });

  it('keyless entries share one group, taking its turn like a key, not bound by inHand', async () => {
    const entries = await pendingOfKeys(['', '', '', 'a', 'a']);
    const { stream } = entries[0]!;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { accept, seen } = queuesOf(stream, { concurrency: 3, hold: () => held });
    await accept(entries);
    // Three handlers: the keyless group's turn twice, key a's once, all held until seen so.
    await waitFor(() => seen.running.get('') === 2 && seen.running.get('a') === 1, { message: 'two keyless and one of a running' });
    release();
    await allAcked(stream);
    expect(seen.most.get('')).toBe(2);
    expect(seen.most.get('a')).toBe(1);
  });

  it('accept returns while what could start does not fill two rounds of handlers: a key at its inHand does not hold the reads back', async () => {
    const entries = await pendingOfKeys(Array.from({ length: 50 }, () => 'a'));
    const { stream } = entries[0]!;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { queues, accept } = queuesOf(stream, { concurrency: 4, hold: () => held });
    // One of key a runs, 49 wait behind its inHand: the fetch may read on to find other keys.
    await accept(entries);
    expect(queues.held).toBe(49);
    release();
    await allAcked(stream);
  });

  it('holds read entries within a budget of bytes, and sizes the park by the entries read so far', async () => {
    const r = redis.client();
    const { key: stream } = await groupOnNewStream(r, 's');
    const big = 'x'.repeat(100_000);
    for (let i = 0; i < 20; i++) await r.xadd(stream, '*', 'n', String(i), 'partitionKey', 'a', 'data', big);
    const reply = (await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', 20, 'STREAMS', stream, '>')) as [string, [string, string[]][]][];
    const entries = reply[0]![1].map(([id, fields]) => ({ stream, id, fields, deliveryCount: 1 }));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // 1 MB of waiting entries at most: the 20 of 100 KB (one running) are over it.
    const { queues, accept } = queuesOf(stream, { concurrency: 1, maxHeldBytes: 1_000_000, hold: () => held });
    let accepted = false;
    const accepting = accept(entries).then(() => (accepted = true));
    await waitFor(() => queues.held === 19, { message: '19 waiting' });
    expect(accepted).toBe(false);
    // Entries of 100 KB: a park asks for 83 (8 MB), not 200; never fewer than asked.
    expect(queues.readSize(10)).toBe(83);
    expect(queues.readSize(100)).toBe(100);
    release();
    await accepting;
    await allAcked(stream);
  });
});
