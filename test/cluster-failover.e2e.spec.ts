import { Controller, Injectable } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  checkReadiness,
  partitionKey,
  partitionOf,
  RedisStreamsClient,
  RedisStreamsContext,
  RedisStreamsRecord,
  RedisStreamsServer,
  RedisStreamsStatus,
  StreamPattern,
} from 'nestjs-redis-streams';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { OrderLog, recording } from './support/order-checker.js';
import { inspectStreams } from '../libs/redis-streams/src/ops/stream-reports.js';
import { lastValueFrom } from 'rxjs';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { captureLogs } from './support/logs.js';
import { startProducer } from './support/producer.js';
import { waitFor } from './support/wait-for.js';

// Each test fails a master over: its own cluster, so no other file sees it.
let cluster: TestCluster;
beforeAll(async () => (cluster = await startCluster()), 60_000);
afterAll(async () => cluster?.stop());

@Injectable()
class Handled {
  /** Handlings per order number. */
  readonly counts = new Map<number, number>();
  /** When each order number was first handled (ms since epoch). */
  readonly firstAt = new Map<number, number>();
  record(i: number): void {
    this.counts.set(i, (this.counts.get(i) ?? 0) + 1);
    if (!this.firstAt.has(i)) this.firstAt.set(i, Date.now());
  }
}

@Controller()
class Orders {
  constructor(private readonly handled: Handled) {}
  @StreamPattern('orders')
  orders(@Payload() payload: { i: number }, @Ctx() _ctx: RedisStreamsContext): void {
    this.handled.record(payload.i);
  }
}

const closers: (() => Promise<void>)[] = [];
const startApps = useApps();
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function worker(prefix: string, consumer: string) {
  const moduleRef = await Test.createTestingModule({ controllers: [Orders], providers: [Handled] }).compile();
  // minIdleMs short: work whose ack died with a master comes back within the test.
  const server = new RedisStreamsServer({
    connection: cluster.urls,
    group: 'g',
    consumer,
    keyPrefix: prefix,
    batchSize: 50,
    blockMs: 200,
    minIdleMs: 1000,
  });
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: process.env.TEST_LOGS ? undefined : false });
  const errors: unknown[] = [];
  server.on('error', (err) => errors.push(err));
  await app.listen();
  closers.push(() => app.close());
  return { handled: app.get(Handled), errors };
}

/** Emits numbered orders from 4 concurrent loops until stopped; records which emits Redis acknowledged. */
function produce(prefix: string) {
  const client = new RedisStreamsClient({ connection: cluster.urls, keyPrefix: prefix, commandTimeoutMs: 10_000 });
  let stopped = false;
  // A test that failed before stop(): the loops end before the client closes (a closed client fails
  // each emit at once, and loops of failures that never wait would hold the event loop for good).
  closers.push(async () => {
    stopped = true;
    await Promise.all(loops);
    await client.close();
  });
  const acked = new Map<number, { id: string; at: number }>();
  /** When each emit began. */
  const startedAt: number[] = [];
  const failed: number[] = [];
  /** Why each failed emit failed. */
  const reasons: string[] = [];
  let next = 0;
  const loops = Array.from({ length: 4 }, async () => {
    while (!stopped) {
      const i = next++;
      startedAt[i] = Date.now();
      try {
        acked.set(i, { id: await lastValueFrom(client.emit('orders', { i })), at: Date.now() });
      } catch (err) {
        failed.push(i); // not acknowledged: the producer would retry it; not counted against the transport
        reasons.push(err instanceof Error ? err.message : String(err));
        // A failure may come without any I/O: let timers (the test's own deadlines) run.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  });
  return {
    acked,
    failed,
    reasons,
    startedAt,
    sent: () => next,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

async function underLoad(fail: (key: string) => Promise<{ oldMaster: number; newMaster: number; ms: number }>, label: string) {
  const prefix = uniquePrefix();
  const key = `${prefix}orders`;
  const w1 = await worker(prefix, 'w1');
  const w2 = await worker(prefix, 'w2');
  const handledCount = () => new Set([...w1.handled.counts.keys(), ...w2.handled.counts.keys()]).size;
  const producer = produce(prefix);
  await waitFor(() => handledCount() >= 1000, { message: '1,000 orders handled before the failover', timeoutMs: 30_000 });

  const { oldMaster, newMaster, ms: failoverMs } = await fail(key);
  // The harness first waits for a synced replica; the failover itself began `ms` ago.
  const failedAt = Date.now() - failoverMs;
  // Load goes on until 1,000 more orders were acknowledged after the failover.
  await waitFor(() => [...producer.acked.values()].filter((a) => a.at > failedAt).length >= 1000, {
    message: '1,000 orders acknowledged after the failover',
    timeoutMs: 60_000,
  });
  await producer.stop();

  // What the new master holds: an acknowledged order missing there was lost with the old master.
  const admin = cluster.client();
  const inStream = new Set((await admin.xrange(key, '-', '+')).map(([id]) => id));
  const lostWithMaster = [...producer.acked.entries()].filter(([, a]) => !inStream.has(a.id)).map(([i]) => i);
  const mustHandle = [...producer.acked.keys()].filter((i) => !lostWithMaster.includes(i));
  const handled = (i: number) => w1.handled.counts.has(i) || w2.handled.counts.has(i);
  await waitFor(() => mustHandle.every(handled), {
    message: `every acknowledged order handled (${mustHandle.filter((i) => !handled(i)).length} missing)`,
    timeoutMs: 30_000,
  });
  const handlings = [...w1.handled.counts.values(), ...w2.handled.counts.values()].reduce((a, b) => a + b, 0);
  const distinct = handledCount();
  // Resumed: the first order whose emit began after the failover began, handled.
  const firstAfter = Math.min(
    ...[...w1.handled.firstAt, ...w2.handled.firstAt].filter(([i]) => producer.startedAt[i]! > failedAt).map(([, at]) => at),
  );
  const figures = {
    failover: label,
    masters: `${oldMaster} → ${newMaster}`,
    failoverMs,
    sent: producer.sent(),
    acknowledged: producer.acked.size,
    notAcknowledged: producer.failed.length,
    lostWithMaster: lostWithMaster.length,
    lostByTransport: mustHandle.filter((i) => !handled(i)).length,
    handledOnce: distinct,
    duplicates: handlings - distinct,
    resumeMs: firstAfter - failedAt,
    loopErrors: w1.errors.length + w2.errors.length,
    // An emit may fail only by waiting out its commandTimeoutMs (10 s): a failover that ends sooner fails none.
    failedBefore: producer.reasons.filter((r) => !r.includes('timed out')),
  };
  console.log(`cluster failover figures: ${JSON.stringify(figures)}`);
  return figures;
}

describe('failover on a Redis Cluster, under load', () => {
  it("CLUSTER FAILOVER of the busy stream's master: every acknowledged order is handled, the workers go on", async () => {
    const figures = await underLoad((key) => cluster.failover(key), 'manual');
    // A manual failover waits for the replica to catch up: nothing acknowledged may be lost.
    expect(figures.lostWithMaster).toBe(0);
    expect(figures.lostByTransport).toBe(0);
  }, 120_000);

  // Before the kill -9 test: that one leaves a shard without a replica.
  it('two failovers with entries handled between them (Redis 7.0 keeps a stale entries-read on the node promoted back): lag 0 once everything is handled', async () => {
    const app = await startApps({ connection: cluster.urls, group: 'g', keyPrefix: uniquePrefix(), blockMs: 50 });
    const key = app.key();
    const admin = cluster.client();
    const handled = (count: number) =>
      waitFor(
        async () =>
          app.recorder.calls.length === count &&
          (await app.server.health({ maxStatsAgeMs: 0 })).streams.find((s) => s.stream === key)?.pending === 0,
        {
          timeoutMs: 20_000,
          message: `${count} entries handled and acked`,
        },
      );
    for (let n = 0; n < 100; n++) await admin.xadd(key, '*', 'n', String(n));
    await handled(100);
    await cluster.failover(key);
    // Handled on the new master; its replica (the old master) gets the reads without entries-read.
    for (let n = 100; n < 400; n++) await admin.xadd(key, '*', 'n', String(n));
    await handled(400);
    await cluster.failover(key);
    // A reading that reached the promoted node (one sent during the failover may fail: statsError).
    const health = await waitFor(
      async () => {
        const h = await app.server.health({ maxStatsAgeMs: 0 });
        return h.statsError === undefined && h;
      },
      { message: 'figures read from the promoted node' },
    );
    expect(health.streams.filter((s) => s.stream === key).map((s) => [s.lag, s.pending])).toEqual([[0, 0]]);
    expect(checkReadiness(health, { maxLag: 10 })).toEqual({ up: true, reasons: [] });
    expect((await inspectStreams(admin, [key], 'g'))[0]!.groups.map((g) => g.lag)).toEqual([0]);
  }, 120_000);

  it('kill -9 of that master: every acknowledged order the new master holds is handled; the ones lost with the crash are counted', async () => {
    let killed: number | undefined;
    try {
      const figures = await underLoad(async (key) => {
        const failed = await cluster.killMaster(key);
        killed = failed.oldMaster;
        return failed;
      }, 'kill -9');
      expect(figures.lostByTransport).toBe(0);
      expect(figures.failedBefore).toEqual([]);
      // Asynchronous replication may drop the last acknowledged writes; a handful at most at this load.
      expect(figures.lostWithMaster).toBeLessThan(figures.acknowledged);
    } finally {
      // Every shard with a replica again for the next test (its durable acks hold on a master without one).
      if (killed !== undefined) await cluster.revive(killed);
    }
  }, 120_000);

  // Last: it kills a master too (the dead node revived as the new master's replica). Gated until issue 48: it stalled in 3 of 7 full
  // runs. The cause was this test: its wait read and parsed the whole order log once per acknowledged entry, on every
  // poll (O(n²): 2–3 s with the event loop blocked, by 1,300 entries), so the workers in this process renewed their 2 s
  // leases late, partitions changed hands every few seconds, and a renewal answered late was taken for the loss of the
  // next epoch (fixed in PartitionOwner: a beat's answer counts only for the value it was sent with).
  it('an ordered pattern across a manual failover and a master killed: each key in order, nothing acknowledged lost', async () => {
    const prefix = uniquePrefix();
    const log = new OrderLog();
    const PARTITIONS = 8;
    // The workers' log lines, shown when the test fails (with the group's state of what was not handled).
    const t0 = Date.now();
    const lines: string[] = [];
    const logger = (name: string) => {
      const put = (m: unknown) => void lines.push(`${Date.now() - t0} ms ${name}: ${String(m)}`);
      return { log: put, warn: put, error: put };
    };
    const consumers: StreamConsumer[] = [];
    for (const name of ['a', 'b']) {
      const c = new StreamConsumer({
        connection: cluster.urls,
        group: 'g',
        consumer: name,
        keyPrefix: prefix,
        blockMs: 200,
        minIdleMs: 2000,
        leaseRenewMs: 400,
        concurrency: 4,
        logger: logger(name),
        // Acks waited for on the replica: the kill -9 loses none (asynchronous replication would otherwise lose the
        // last ones, and their entries would run again after later ones of their key). Held while the replica syncs
        // after the manual failover, and after the kill until the dead node is back as the new master's replica
        // (carrying on instead, an ack made degraded could die with the master: seen in 1 of 6 runs).
        durableAcks: { replicas: 1, timeoutMs: 300, whenUnconfirmed: 'hold' },
      });
      await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS }).start();
      closers.push(() => c.close());
      consumers.push(c);
    }
    const client = new RedisStreamsClient({
      connection: cluster.urls,
      keyPrefix: prefix,
      partitions: { orders: PARTITIONS },
      commandTimeoutMs: 10_000,
    });
    closers.push(() => client.close());
    const acked: string[] = [];
    let stopped = false;
    let n = 0;
    const producing = (async () => {
      while (!stopped) {
        const key = `k${n++ % 64}`;
        const stream = partitionKey(prefix, 'orders', partitionOf(key, PARTITIONS));
        try {
          const id = await lastValueFrom(client.emit('orders', new RedisStreamsRecord({ ms: 2 }, {}, { partitionKey: key })));
          acked.push(`${stream} ${id}`);
        } catch {
          await new Promise((resolve) => setImmediate(resolve)); // not acknowledged: not counted
        }
      }
    })();
    const handled = () => log.handled().size;
    await waitFor(() => handled() >= 300, { message: '300 handled', timeoutMs: 30_000, progress: handled });
    // A partition whose shard has a replica (the kill -9 test above left one shard without).
    const withReplica: string[] = [];
    for (let i = 0; i < PARTITIONS; i++) {
      const key = partitionKey(prefix, 'orders', i);
      const role = (await cluster.node(await cluster.masterOf(key)).role()) as [string, number, unknown[]];
      if (role[2].length > 0) withReplica.push(key);
    }
    expect(withReplica.length).toBeGreaterThan(0);
    lines.push(`${Date.now() - t0} ms test: failover of ${withReplica[0]}`);
    await cluster.failover(withReplica[0]!);
    await waitFor(() => handled() >= 800, { message: '800 handled', timeoutMs: 60_000, progress: handled });
    lines.push(`${Date.now() - t0} ms test: kill -9 of the master of ${withReplica[0]}`);
    const { oldMaster } = await cluster.killMaster(withReplica[0]!);
    // The promoted replica has no replica of its own: its held partitions run again once the dead node is back as one.
    await cluster.revive(oldMaster);
    await waitFor(() => handled() >= 1300, { message: '1,300 handled', timeoutMs: 60_000, progress: handled });
    stopped = true;
    await producing;
    // What the masters hold now: an acknowledged entry missing there was lost with the killed master.
    const admin = cluster.client();
    const held = new Set<string>();
    for (let i = 0; i < PARTITIONS; i++) {
      const key = partitionKey(prefix, 'orders', i);
      for (const [id] of await admin.xrange(key, '-', '+')) held.add(`${key} ${id}`);
    }
    const mustHandle = acked.filter((e) => held.has(e));
    // The log read once a poll (it grows with every handling): the predicate must not hold this process' event loop.
    const notHandled = () => {
      const done = log.handled();
      return mustHandle.filter((e) => !done.has(e));
    };
    await waitFor(() => notHandled().length === 0, {
      message: 'every held entry handled',
      timeoutMs: 60_000,
      progress: () => notHandled().length,
    }).catch(async (err: unknown) => {
      const missing = notHandled();
      const seen = [`${missing.length} not handled, first: ${missing.slice(0, 5).join(', ')}`, ...lines];
      for (const stream of new Set(missing.map((e) => e.split(' ')[0]!)))
        seen.push(
          `${stream}: ${JSON.stringify(await admin.xinfo('GROUPS', stream))} ${JSON.stringify(await admin.xinfo('CONSUMERS', stream, 'g'))}`,
        );
      for (const c of consumers) seen.push(JSON.stringify((await c.health({ stats: false })).streams.map((x) => [x.stream, x.ordering])));
      throw new Error(`${String(err)}\n${seen.join('\n')}`);
    });
    const { violations } = log.check(mustHandle);
    // A violation comes with the workers' log and what the order log says of its key.
    const about = violations.map((v) => /^key (\S+) (\S+): /.exec(v)).filter((m) => m !== null);
    const keyLines = log.lines().filter((l) => about.some((m) => l.split(' ')[2] === m[1] && l.endsWith(` ${m[2]}`)));
    expect(violations, [...lines, '--- order log of the key ---', ...keyLines].join('\n')).toEqual([]);
    expect(acked.length - mustHandle.length).toBeLessThan(acked.length / 10);
  }, 180_000);
});

/**
 * Resharding: `key`'s slot moved to master `to` (IMPORTING, MIGRATING, its keys MIGRATEd, SETSLOT NODE on every
 * master), no connection cut: a blocked read on the slot is redirected (MOVED) by Redis itself.
 */
async function moveSlot(key: string, to: number): Promise<void> {
  const slot = await cluster.keySlot(key);
  const from = await cluster.masterOf(key);
  const [src, dst] = [cluster.node(from), cluster.node(to)];
  const [srcId, dstId] = [String(await src.call('CLUSTER', 'MYID')), String(await dst.call('CLUSTER', 'MYID'))];
  await dst.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', srcId);
  await src.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', dstId);
  for (let keys = (await src.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[]; keys.length > 0;) {
    await src.call('MIGRATE', '127.0.0.1', to, '', 0, 5000, 'KEYS', ...keys);
    keys = (await src.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
  }
  for (const port of await cluster.masters()) await cluster.node(port).call('CLUSTER', 'SETSLOT', slot, 'NODE', dstId);
  await waitFor(async () => (await cluster.masterOf(key)) === to, { message: `slot ${slot} served by ${to}` });
}

describe('a slot moved by resharding (no connection lost)', () => {
  it("a producer's reply lane follows its reply stream's slot: no loss logged, no status flap (review-i)", async () => {
    const prefix = uniquePrefix();
    const app = await startApps(
      { connection: cluster.urls, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 200 },
      { controllers: [RequestsController] },
    );
    app.recorder.behavior = (call) => (call.payload as { n: number }).n * 2;
    const logs = captureLogs();
    const { client, close } = await startProducer({ connection: cluster.urls, keyPrefix: prefix }, logs.logger);
    closers.push(close);
    expect(await lastValueFrom(client.send('quote', { n: 1 }))).toBe(2);
    const statuses: string[] = [];
    const watching = client.status.subscribe((s) => statuses.push(s));
    const from = await cluster.masterOf(client.replyStream);
    await moveSlot(
      client.replyStream,
      (await cluster.masters()).find((m) => m !== from)!,
    );
    // Answered: the reply lane reads the slot's new master.
    expect(await lastValueFrom(client.send('quote', { n: 2 }))).toBe(4);
    watching.unsubscribe();
    const lines = logs.from('RedisStreamsClient');
    expect(lines.some((l) => /MOVED/.test(l))).toBe(true);
    // Re-pointed, not lost: before the fix, "connection to cluster(…) dropped, and restored after 0.0 s", and a
    // CONNECTED → CONNECTING → CONNECTED flap.
    expect(lines.filter((l) => /dropped|restored|lost|connected to/.test(l))).toEqual([]);
    expect(statuses.filter((s) => s !== RedisStreamsStatus.CONNECTED)).toEqual([]);
  }, 60_000);
});
