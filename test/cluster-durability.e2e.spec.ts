import { lastValueFrom } from 'rxjs';
import { NotDurableError, partitionKey, partitionOf, RedisStreamsRecord, type RedisStreamsClient } from 'nestjs-redis-streams';
import { StreamConsumer, type StreamConsumerOptions } from 'nestjs-redis-streams/core';
import { renderReports } from '../libs/redis-streams/src/cli/inspect.js';
import { inspectStreams } from '../libs/redis-streams/src/ops/stream-reports.js';
import { captureLogs } from './support/logs.js';
import { OrderLog, recording } from './support/order-checker.js';
import { useProducers } from './support/producer.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { uniquePrefix } from './support/test-app.js';
import { durableAcksConsumer } from './support/durable-acks-consumer.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';
import { monitorCommands, type MonitoredCommand } from './support/monitor.js';

// Durable produce and durable acks on a local 3+3 cluster (issue 48): the waits follow a partition's slot through a
// failover, cost one WAIT per master (at most one per slot), and with no replica reachable (the replica of a
// partition's master killed -9, then started again) each choice does what the docs say within its bound: 'hold'
// holds, 'carry-on' goes on degraded, durable produce fails each emit with NotDurableError naming the entry it wrote.

let cluster: TestCluster;
beforeAll(async () => (cluster = await startCluster()), 60_000);
afterAll(async () => cluster?.stop());

const startProducer = useProducers();
const { consumers } = useLeftoversAfterEach();
const PARTITIONS = 4;

const consumer = (prefix: string, options?: StreamConsumerOptions): StreamConsumer =>
  durableAcksConsumer(consumers, cluster.urls, prefix, options);

async function producer(prefix: string, options: object = {}): Promise<RedisStreamsClient> {
  const { client } = await startProducer({
    connection: cluster.urls,
    keyPrefix: prefix,
    partitions: { orders: PARTITIONS },
    commandTimeoutMs: 5000,
    ...options,
  });
  return client;
}

/** `count` keys whose entries go to partition `partition`. */
const keysOf = (partition: number, count: number): string[] => {
  const keys: string[] = [];
  for (let i = 0; keys.length < count; i++) if (partitionOf(`k${i}`, PARTITIONS) === partition) keys.push(`k${i}`);
  return keys;
};

/** Emits `perKey` entries for each key, one key after the other; returns `stream id` of each. */
async function produce(client: RedisStreamsClient, prefix: string, keys: string[], perKey: number): Promise<string[]> {
  const written: string[] = [];
  for (let n = 0; n < perKey; n++)
    for (const key of keys) {
      const id = await lastValueFrom(client.emit<string>('orders', new RedisStreamsRecord({ n }, {}, { partitionKey: key })));
      written.push(`${partitionKey(prefix, 'orders', partitionOf(key, PARTITIONS))} ${id}`);
    }
  return written;
}

describe('durable acks and durable produce on a Redis Cluster', () => {
  it("durable acks follow a partition's slot through a manual failover: the partition goes on", async () => {
    const prefix = uniquePrefix();
    const log = new OrderLog();
    const { logger, lines } = captureLogs();
    const c = consumer(prefix, { logger, durableAcks: { replicas: 1, timeoutMs: 300 } });
    await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS }).start();
    const client = await producer(prefix);
    const keys = keysOf(0, 3);
    const first = await produce(client, prefix, keys, 3);
    await waitFor(() => log.handled().size >= first.length, { message: 'the first entries handled', progress: () => log.handled().size });

    await cluster.failover(partitionKey(prefix, 'orders', 0));
    const rest = await produce(client, prefix, keys, 3);
    await waitFor(() => log.handled().size >= first.length + rest.length, {
      message: `the entries written after the failover handled (log: ${lines.slice(-3).join(' | ')})`,
      progress: () => log.handled().size,
    });
    expect(log.check([...first, ...rest]).violations).toEqual([]);
  });

  it('durable produce: emits begun together across partitions pay one WAIT per master (at most one per slot)', async () => {
    const prefix = uniquePrefix();
    const client = await producer(prefix, { durability: { replicas: 1, timeoutMs: 5000 } });
    const streams = Array.from({ length: PARTITIONS }, (_, p) => partitionKey(prefix, 'orders', p));
    const keys = Array.from({ length: PARTITIONS }, (_, p) => keysOf(p, 10)).flat();
    // Every slot's master has its durable connection open.
    await Promise.all(
      keys
        .slice(0, PARTITIONS * 10)
        .filter((_, i) => i % 10 === 0)
        .map((key) => emitTo(client, key)),
    );
    const masters = new Map<number, number>(); // master → slots (partitions) it serves here
    for (const stream of streams) {
      const master = await cluster.masterOf(stream);
      masters.set(master, (masters.get(master) ?? 0) + 1);
    }
    const before = new Map<number, number>();
    for (const master of masters.keys()) before.set(master, await waitCalls(master));
    const ids = await Promise.all(keys.map(async (key) => `${partitionOf(key, PARTITIONS)} ${await emitTo(client, key)}`));
    expect(new Set(ids).size).toBe(keys.length);
    const paid: Record<number, { slots: number; waits: number }> = {};
    for (const [master, slots] of masters) paid[master] = { slots, waits: (await waitCalls(master)) - before.get(master)! };
    console.log(`durable produce, WAITs per master for ${keys.length} emits begun together: ${JSON.stringify(paid)}`);
    // 40 emits over 4 slots on 3 masters: a WAIT per master (a busy machine may split a tick's emits once), never one
    // per entry, nor more than one per slot in all.
    for (const { waits } of Object.values(paid)) expect([1, 2]).toContain(waits);
    expect(Object.values(paid).reduce((sum, { waits }) => sum + waits, 0)).toBeLessThanOrEqual(streams.length);
  });

  describe('no replica reachable', () => {
    /** Partition `p`'s stream, its master, and a partition served by another master (which keeps its replica). */
    async function layout(prefix: string, p: number) {
      const stream = partitionKey(prefix, 'orders', p);
      const { master, replica } = await cluster.replicaOf(stream);
      let other = -1;
      for (let q = 0; q < PARTITIONS && other < 0; q++)
        if ((await cluster.masterOf(partitionKey(prefix, 'orders', q))) !== master) other = q;
      return { stream, master, replica, other };
    }
    const durabilityOf = async (c: StreamConsumer, stream: string) =>
      (await c.health({ stats: false })).streams.find((s) => s.stream === stream)?.ordering?.durability;
    const startsOn = (log: OrderLog, stream: string) => log.lines().filter((l) => l.startsWith('S ') && l.split(' ')[2] === stream).length;

    it("'hold': the partition holds (health, one WARN line, inspect) and nothing starts; a replica back, it runs on in order", async () => {
      const prefix = uniquePrefix();
      const log = new OrderLog();
      const { logger, lines } = captureLogs();
      const timeoutMs = 300;
      const c = consumer(prefix, { logger, durableAcks: { replicas: 1, timeoutMs } });
      await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS }).start();
      const client = await producer(prefix);
      const { stream, master, replica, other } = await layout(prefix, 0);
      const first = await produce(client, prefix, keysOf(0, 3), 2);
      await waitFor(() => log.handled().size >= first.length, { message: 'the first entries handled', progress: () => log.handled().size });

      await cluster.kill(replica);
      let rest: string[] = [];
      let elsewhere: string[] = [];
      try {
        rest = await produce(client, prefix, keysOf(0, 3), 3);
        await waitFor(async () => (await durabilityOf(c, stream))?.state === 'held', { message: 'the partition held' });
        const held = startsOn(log, stream);
        // Beats go on, each a wait no replica answers: three more on that master, and still nothing started.
        const waits = await waitCalls(master);
        await waitFor(async () => (await waitCalls(master)) >= waits + 3, { message: 'three more waits', timeoutMs: 20_000 });
        expect(startsOn(log, stream)).toBe(held);
        expect(log.handled().size).toBeLessThan(first.length + rest.length);
        // A partition of another master goes on meanwhile.
        elsewhere = await produce(client, prefix, keysOf(other, 2), 2);
        await waitFor(() => elsewhere.every((e) => log.handled().has(e)), { message: 'the other partition goes on' });
        expect(lines.filter((l) => l.includes(`ordered "${stream}": acks not confirmed on 1 replica`))).toEqual([
          expect.stringMatching(/^warn .*the partition is held, nothing starts until the replicas confirm/),
        ]);
        const text = renderReports(await inspectStreams(cluster.client(), [stream], 'g'));
        expect(text).toMatch(/durable acks: HELD since .*: 0 of 1 replica confirmed, nothing starts until the replicas confirm/);
      } finally {
        await cluster.revive(replica);
      }
      await waitFor(() => log.handled().size >= first.length + rest.length + elsewhere.length, {
        message: 'the rest handled once a replica is back',
        progress: () => log.handled().size,
      });
      expect(log.check([...first, ...rest, ...elsewhere]).violations).toEqual([]);
      await waitFor(async () => (await durabilityOf(c, stream))?.state === 'confirmed', { message: 'confirmed again' });
      expect(lines.some((l) => l.includes(`ordered "${stream}": acks confirmed on 1 replica again: the partition runs again`))).toBe(true);
    });

    it("'carry-on': the partition goes on without waiting (DEGRADED, said once) and handles everything; a replica back, durable again", async () => {
      const prefix = uniquePrefix();
      const log = new OrderLog();
      const { logger, lines } = captureLogs();
      const timeoutMs = 300;
      const c = consumer(prefix, { logger, durableAcks: { replicas: 1, timeoutMs, whenUnconfirmed: 'carry-on' } });
      await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS }).start();
      const client = await producer(prefix);
      const { stream, master, replica } = await layout(prefix, 0);
      const first = await produce(client, prefix, keysOf(0, 1), 3);
      await waitFor(() => log.handled().size >= first.length, { message: 'the first entries handled', progress: () => log.handled().size });

      await cluster.kill(replica);
      let rest: string[];
      let tookMs: number;
      // What the partition's master is sent meanwhile: an ack that waits is the ack's script, then WAIT, on one connection.
      const sent: MonitoredCommand[] = [];
      let monitor: { close: () => void } | undefined;
      try {
        monitor = await monitorCommands(master, (command) => sent.push(command));
        // 20 entries of one key, one after the other: waiting timeoutMs for each ack would take 20 of them.
        rest = await produce(client, prefix, keysOf(0, 1), 20);
        const start = performance.now();
        await waitFor(() => rest.every((e) => log.handled().has(e)), { message: 'every entry handled without a replica' });
        tookMs = performance.now() - start;
        expect((await durabilityOf(c, stream))?.state).toBe('degraded');
        expect(lines.filter((l) => l.includes(`ordered "${stream}": acks not confirmed on 1 replica`))).toEqual([
          expect.stringMatching(/^warn .*carrying on without waiting, DEGRADED/),
        ]);
      } finally {
        monitor?.close();
        await cluster.revive(replica);
      }
      // A script's own calls follow it in MONITOR's output (source "lua"): an ack is a script that ran XACK.
      const ranXack = (i: number) => {
        for (let j = i + 1; j < sent.length && sent[j]!.source === 'lua'; j++) if (sent[j]!.args[0]?.toUpperCase() === 'XACK') return true;
        return false;
      };
      const acks = sent.flatMap((c, i) => (c.args[0]?.toUpperCase() === 'EVAL' && ranXack(i) ? [i] : []));
      const waited = acks.filter(
        (i) =>
          sent
            .slice(i + 1)
            .find((c) => c.source === sent[i]!.source)
            ?.args[0]?.toUpperCase() === 'WAIT',
      );
      console.log(
        `carry-on: 20 entries of one key handled in ${Math.round(tookMs)} ms with no replica (timeoutMs ${timeoutMs}); ${acks.length} acks, ${waited.length} waited`,
      );
      // The acks of the 20 went to this master (the count means something), and once one wait ran out none waited again:
      // what the machine's speed cannot change (it took 3.2 s on a busy CI run, 0.6 s on a quiet one).
      expect(acks.length).toBeGreaterThanOrEqual(10);
      expect(waited.length).toBeLessThanOrEqual(1);
      expect(log.check([...first, ...rest]).violations).toEqual([]);
      await waitFor(async () => (await durabilityOf(c, stream))?.state === 'confirmed', { message: 'durable again' });
    });

    // Seen failing on 80c0264, where every beat of an owned partition waited (WAIT, timeoutMs) in turn on the one
    // durable connection to its master: with no replica the beats of its 4 partitions needed 1,200 ms of waits per
    // 400 ms lease renewal, fell behind, the lease ran out, the owner released and took each partition again, a beat
    // queued meanwhile renewed the old lease after the release, and the owner waited it out as "another process
    // under this consumer's name" (9 ownership changes in these 5 s; 50 in 70 s and entries unhandled for over 60 s
    // in a longer probe). Passes since the writes of every partition on one master share one wait (2dc78b3).
    it("'carry-on' with several partitions on the master without a replica: each goes on, owned throughout", async () => {
      const prefix = uniquePrefix();
      const log = new OrderLog();
      const { logger, lines } = captureLogs();
      // minIdleMs 5 s: a renewal late on CI's full machine does not lapse the lease (2 s did, once, with the fix in);
      // the old code's beats fell behind by 800 ms every 400 ms, past 5 s within this test's 5 s of writes.
      const c = consumer(prefix, {
        logger,
        minIdleMs: 5000,
        leaseRenewMs: 400,
        durableAcks: { replicas: 1, timeoutMs: 300, whenUnconfirmed: 'carry-on' },
      });
      await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS * 2 }).start();
      const client = await producer(prefix, { partitions: { orders: PARTITIONS * 2 } });
      // Partition 2 of 8 is {orders:2}: its master serves {orders:3}, {orders:6} and {orders:7} too.
      const stream = partitionKey(prefix, 'orders', 2);
      const { master, replica } = await cluster.replicaOf(stream);
      const onMaster: number[] = [];
      for (let p = 0; p < PARTITIONS * 2; p++) if ((await cluster.masterOf(partitionKey(prefix, 'orders', p))) === master) onMaster.push(p);
      expect(onMaster.length).toBeGreaterThanOrEqual(3);
      const keys = Array.from({ length: 64 }, (_, i) => `k${i}`).filter((k) => onMaster.includes(partitionOf(k, PARTITIONS * 2)));
      await cluster.kill(replica);
      const written: string[] = [];
      try {
        const ownedBefore = lines.filter((l) => / (owns|released) "/.test(l)).length;
        // 5 s of entries to those partitions, one every 50 ms: the partitions stay owned throughout, and all are handled.
        for (let n = 0; n < 100; n++) {
          const key = keys[n % keys.length]!;
          const id = await lastValueFrom(client.emit<string>('orders', new RedisStreamsRecord({ n }, {}, { partitionKey: key })));
          written.push(`${partitionKey(prefix, 'orders', partitionOf(key, PARTITIONS * 2))} ${id}`);
          await new Promise((resolve) => setTimeout(resolve, 50)); // pacing the emits, not waiting for a condition
        }
        expect(lines.filter((l) => / (owns|released) "/.test(l)).slice(ownedBefore)).toEqual([]);
        await waitFor(() => written.every((e) => log.handled().has(e)), {
          message: 'every entry handled',
          progress: () => log.handled().size,
        });
        expect(log.check(written).violations).toEqual([]);
      } finally {
        await cluster.revive(replica);
      }
    });

    /**
     * Emits to partition 0 with its master's replica killed: `begin` starts them (together, or spread over time);
     * each one's outcome and how long it took. The replica is back (revived) when it resolves.
     */
    async function withoutReplica(begin: (emit: (key: string) => Promise<Outcome>, keys: string[]) => Promise<Outcome[]>) {
      const prefix = uniquePrefix();
      const client = await producer(prefix, { durability: { replicas: 1, timeoutMs: NO_REPLICA_TIMEOUT_MS } });
      const { stream, replica, other } = await layout(prefix, 0);
      const keys = keysOf(0, 10);
      // The durable connection is open. Whether this one is confirmed does not matter (a replica revived by the test
      // before, though listed online by its master, was seen not to answer this first WAIT within 300 ms once in 5).
      await emitTo(client, keys[0]!).catch((err: unknown) => {
        if (!(err instanceof NotDurableError)) throw err;
      });
      await cluster.kill(replica);
      const emit = async (key: string): Promise<Outcome> => {
        const start = performance.now();
        const err = await emitTo(client, key).then(
          () => undefined,
          (e: unknown) => e,
        );
        return { err, ms: performance.now() - start };
      };
      try {
        const outcomes = await begin(emit, keys);
        // A partition whose master has its replica: confirmed meanwhile.
        await expect(emitTo(client, keysOf(other, 1)[0]!)).resolves.toMatch(/^\d+-\d+$/);
        return { stream, outcomes };
      } finally {
        await cluster.revive(replica);
      }
    }

    /** Each emit failed with NotDurableError naming its entry, which is in the stream, within its own wait and a margin. */
    async function expectNotDurable(stream: string, outcomes: Outcome[]) {
      const admin = cluster.client();
      for (const { err, ms } of outcomes) {
        expect(err).toBeInstanceOf(NotDurableError);
        const nd = err as NotDurableError;
        expect(nd.stream).toBe(stream);
        expect(nd.message).toMatch(new RegExp(`entry ${nd.id} was written on the master, but not confirmed on 1 replica: 0 of 1`));
        expect(await admin.xrange(stream, nd.id, nd.id)).toHaveLength(1);
        // Bounded: its own wait and a margin for a busy machine, never the waits of the emits before it.
        expect(ms).toBeLessThan(NO_REPLICA_TIMEOUT_MS + 1500);
      }
    }

    it('durable produce: emits begun together fail within timeoutMs with NotDurableError naming their entry, which is in the stream; other masters confirm', async () => {
      const { stream, outcomes } = await withoutReplica((emit, keys) => Promise.all(keys.map(emit)));
      console.log(
        `durable produce with no replica, emits begun together: failed after ${outcomes.map((o) => Math.round(o.ms)).join(', ')} ms`,
      );
      await expectNotDurable(stream, outcomes);
    });

    // Seen failing on 80c0264, where each tick's pipeline went out at once on the one durable connection and waited in
    // Redis behind the WAITs of those before it: with no replica, emits begun 50 ms apart failed after 305, 567, 818, …
    // 2,586 ms (the 10th), without bound under steady load. Passes since one pipeline per master is out at a time and
    // the writes begun meanwhile share the next wait (2dc78b3): 305–586 ms.
    it('durable produce: emits begun one after the other each fail within their own timeoutMs (not behind the waits before them)', async () => {
      const { stream, outcomes } = await withoutReplica(async (emit, keys) => {
        const paced: Promise<Outcome>[] = [];
        for (const key of keys) {
          paced.push(emit(key));
          await new Promise((resolve) => setTimeout(resolve, 50)); // pacing the emits, not waiting for a condition
        }
        return Promise.all(paced);
      });
      console.log(
        `durable produce with no replica, emits begun 50 ms apart: failed after ${outcomes.map((o) => Math.round(o.ms)).join(', ')} ms`,
      );
      await expectNotDurable(stream, outcomes);
    });
  });
  it('a master frozen and replaced: emits to its slot reach the promoted replica, plain and durable, with the old one still frozen (review finding: none until the thaw)', async () => {
    const prefix = uniquePrefix();
    const plain = await producer(prefix, { commandTimeoutMs: 1000 });
    const durable = await producer(prefix, { commandTimeoutMs: 1000, durability: { replicas: 1, timeoutMs: 300 } });
    const stream = partitionKey(prefix, 'orders', 0);
    const key = keysOf(0, 1)[0]!;
    const emit = (c: RedisStreamsClient, tag = 'any') =>
      lastValueFrom(c.emit<string>('orders', new RedisStreamsRecord({ tag }, {}, { partitionKey: key })));
    await emit(plain);
    await emit(durable);
    const { master } = await cluster.replicaOf(stream);
    cluster.freeze(master);
    try {
      // Both clients meet the silence (each emit times out), before and after the takeover.
      const tries = [emit(plain, 'timed-out-plain'), emit(durable, 'timed-out-durable')].map((p) => p.catch((err: unknown) => err));
      await cluster.takenOver(stream, master, 30_000);
      for (const err of await Promise.all(tries)) expect(String(err)).toMatch(/no answer within 1000 ms|not sent/);
      // Then each reaches the new master, whose replica (the old master) is frozen: written, and for the durable
      // client not confirmed (NotDurableError names the entry it wrote there), never "no answer".
      const reached = (c: RedisStreamsClient) =>
        waitFor(
          () =>
            emit(c).then(
              () => true,
              (err: unknown) => err instanceof NotDurableError,
            ),
          { message: 'an emit answered by the promoted replica', timeoutMs: 20_000, intervalMs: 200 },
        );
      await reached(plain);
      await reached(durable);
      // What their callers were told timed out is not written on the new master later (ioredis re-sent such a
      // command once the old master's connection was dropped from its pool: review finding). The old one is still
      // frozen: whatever it took dies with it when it comes back as a replica.
      await emit(plain, 'after');
      const tags = (await cluster.client().xrange(stream, '-', '+')).map(([, f]) => JSON.parse(f[f.indexOf('data') + 1]!).tag);
      expect(tags).toContain('after');
      expect(tags.filter((t) => String(t).startsWith('timed-out'))).toEqual([]);
    } finally {
      cluster.thaw(master);
    }
  }, 120_000);

  it('a durable emit its caller was told got no answer is never written by the promoted replica later, nor after later entries (review finding: ioredis re-sent it 5 s later)', async () => {
    const prefix = uniquePrefix();
    const durable = await producer(prefix, { commandTimeoutMs: 1000, durability: { replicas: 1, timeoutMs: 300 } });
    const stream = partitionKey(prefix, 'orders', 0);
    const key = keysOf(0, 1)[0]!;
    const emit = (tag: string) => lastValueFrom(durable.emit<string>('orders', new RedisStreamsRecord({ tag }, {}, { partitionKey: key })));
    // Confirmed once: the shard's replica is in sync (a test before may have thawed it a moment ago).
    await waitFor(
      () =>
        emit('before').then(
          () => true,
          (err: unknown) => (err instanceof NotDurableError ? false : Promise.reject(err)),
        ),
      {
        message: "a durable emit confirmed by the shard's replica",
      },
    );
    const { master } = await cluster.replicaOf(stream);
    cluster.freeze(master);
    try {
      await expect(emit('timed-out')).rejects.toThrow(/no answer within 1000 ms; the entry may or may not have been written/);
      await cluster.takenOver(stream, master, 30_000);
      // The re-send came once the frozen master's connection left the client's pool (2-3 s after the promotion in the
      // review): the caller goes on writing for 8 s, long past it, and the stream is read after.
      for (let i = 0; i < 40; i++) {
        await emit(`later-${i}`).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 200));
      }
      const tags = (await cluster.client().xrange(stream, '-', '+')).map(([, f]) => JSON.parse(f[f.indexOf('data') + 1]!).tag);
      expect(tags.filter((t) => String(t).startsWith('later-')).length).toBeGreaterThan(10);
      expect(tags).not.toContain('timed-out');
    } finally {
      cluster.thaw(master);
    }
  }, 120_000);
});

/** How an emit came out and how long it took. */
interface Outcome {
  err: unknown;
  ms: number;
}

/** The durable produce's timeoutMs in the tests without a replica. */
const NO_REPLICA_TIMEOUT_MS = 300;

/** One entry of `key`'s partition, emitted; its id. */
const emitTo = (client: RedisStreamsClient, key: string): Promise<string> =>
  lastValueFrom(client.emit<string>('orders', new RedisStreamsRecord({ key }, {}, { partitionKey: key })));

/** WAITs a node ran (INFO commandstats). */
async function waitCalls(port: number): Promise<number> {
  const info = await cluster.node(port).info('commandstats');
  return Number(/cmdstat_wait:calls=(\d+)/.exec(info)?.[1] ?? 0);
}
