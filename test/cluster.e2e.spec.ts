import { Controller, Injectable, type LoggerService } from '@nestjs/common';
import { captureLogs } from './support/logs.js';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  DeadLetters,
  partitionKey,
  RedisStreamsClient,
  RedisStreamsContext,
  RedisStreamsRecord,
  RedisStreamsServer,
  StreamPattern,
  type RedisStreamsServerOptions,
} from 'nestjs-redis-streams';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { lastValueFrom } from 'rxjs';
import { requireBuilt, repoRoot } from './support/built.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { waitParked } from './support/parked.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { uniquePrefix } from './support/test-app.js';
import { timed, waitFor } from './support/wait-for.js';

let cluster: TestCluster;
let single: TestRedis;
beforeAll(async () => {
  cluster = await startCluster();
  single = await startRedis({ standalone: true });
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  await single?.stop();
});

interface Seen {
  stream: string;
  id: string;
  pattern: string;
  partition: number | undefined;
  consumer: string;
  deliveryCount: number;
  payload: unknown;
}

@Injectable()
class Seen$ {
  readonly calls: Seen[] = [];
  gate: Promise<unknown> = Promise.resolve();
  record(payload: unknown, ctx: RedisStreamsContext): Promise<unknown> {
    this.calls.push({
      stream: ctx.getStream(),
      id: ctx.getId(),
      pattern: ctx.getPattern(),
      partition: ctx.getPartition(),
      consumer: ctx.getConsumer(),
      deliveryCount: ctx.getDeliveryCount(),
      payload,
    });
    return this.gate;
  }
}

@Controller()
class ThreeStreams {
  constructor(private readonly seen: Seen$) {}
  @StreamPattern('a')
  a(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
  @StreamPattern('b')
  b(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
  @StreamPattern('c')
  c(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
}

@Controller()
class SixPartitions {
  constructor(private readonly seen: Seen$) {}
  @StreamPattern('orders', { partitions: 6 })
  orders(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
}

@Controller()
class FourPartitions {
  constructor(private readonly seen: Seen$) {}
  @StreamPattern('orders', { partitions: 4 })
  orders(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
}

@Controller()
class TwoPartitions {
  constructor(private readonly seen: Seen$) {}
  @StreamPattern('orders', { partitions: 2 })
  orders(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
    return this.seen.record(p, ctx);
  }
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function startWorker(controller: new (...args: any[]) => unknown, options: RedisStreamsServerOptions, logger?: LoggerService) {
  const moduleRef = await Test.createTestingModule({ controllers: [controller], providers: [Seen$] }).compile();
  const server = new RedisStreamsServer({ connection: cluster.urls, group: 'g', ...options });
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: logger ?? (process.env.TEST_LOGS ? undefined : false) });
  await app.listen();
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= app.close());
  closers.push(close);
  return { app, server, seen: app.get(Seen$), close };
}

function client(options: ConstructorParameters<typeof RedisStreamsClient>[0]) {
  const c = new RedisStreamsClient({ connection: cluster.urls, ...options });
  closers.push(() => c.close());
  return c;
}

/** A key prefix under which `a`, `b` and `c` hash to three different masters. */
async function prefixOnThreeMasters(): Promise<string> {
  for (;;) {
    const prefix = uniquePrefix();
    const masters = await Promise.all(['a', 'b', 'c'].map((p) => cluster.masterOf(prefix + p)));
    if (new Set(masters).size === 3) return prefix;
  }
}

/** Connections whose name starts with `name`, on every live node. */
const connections = async (name: string) => {
  const rows = await Promise.all(
    cluster.live().map(async (port) =>
      String(await cluster.node(port).call('CLIENT', 'LIST', 'TYPE', 'normal'))
        .split('\n')
        .map((row) => ({ port, row })),
    ),
  );
  return rows.flat().filter(({ row }) => row.includes(`name=${name}`));
};
const blockingLanes = async (name: string) => (await connections(name)).filter(({ row }) => row.includes(':blocking'));

describe('on a Redis Cluster', () => {
  it('reads streams on three masters with one parked lane each: new entries of all three within a beat, and close() wakes the parks', async () => {
    const prefix = await prefixOnThreeMasters();
    // A stream without its own parked lane waits for a park to end: blockMs late, and closing without
    // waking the parks waits blockMs too. A long BLOCK puts both defects far from the bounds below, which
    // are themselves an order of magnitude above what a busy machine needs.
    const blockMs = 30_000;
    const worker = await startWorker(ThreeStreams, { consumer: 'c1', keyPrefix: prefix, blockMs });
    const admin = cluster.client();
    await waitParked(admin, 'g:c1:', 'three parked lanes', 3);
    // One blocking connection per slot, each on the master that serves it.
    const lanes = await blockingLanes('g:c1:');
    expect(lanes).toHaveLength(3);
    expect(new Set(lanes.map((l) => l.port))).toEqual(new Set(await Promise.all(['a', 'b', 'c'].map((p) => cluster.masterOf(prefix + p)))));
    // Besides: one command connection per node the consumer's ioredis Cluster talks to (at most one per node).
    const command = (await connections('g:c1:')).filter(({ row }) => row.includes(':command'));
    console.log(
      `connections of a consumer reading 3 slots: ${lanes.length} blocking + ${command.length} command (${command.map((c) => c.port).join(', ')})`,
    );
    expect(new Set(command.map((c) => c.port)).size).toBe(command.length);

    // All three lanes are parked: each entry wakes its own, well within one BLOCK.
    const { ms } = await timed(async () => {
      await Promise.all(['a', 'b', 'c'].map((p) => admin.xadd(prefix + p, '*', 'n', p)));
      await waitFor(() => worker.seen.calls.length === 3, { message: 'one entry from each stream', timeoutMs: 2 * blockMs });
    });
    expect(ms).toBeLessThan(blockMs / 4);
    expect(worker.seen.calls.map((c) => c.pattern).sort()).toEqual(['a', 'b', 'c']);

    await waitParked(admin, 'g:c1:', 'three parked lanes again', 3);
    const closed = await timed(() => worker.close());
    expect(closed.ms).toBeLessThan(blockMs / 3);
  }, 120_000);

  it('spreads a 6-partition stream over all three masters; same key, same partition; 2 consumers handle 20,000 entries exactly once', async () => {
    const prefix = uniquePrefix();
    const masters = new Set(await Promise.all(Array.from({ length: 6 }, (_, i) => cluster.masterOf(partitionKey(prefix, 'orders', i)))));
    expect(masters.size).toBe(3);
    // What the workers said (warnings and errors), shown with the handlings of any entry handled twice.
    const logs = captureLogs();
    const w1 = await startWorker(SixPartitions, { consumer: 'w1', keyPrefix: prefix, batchSize: 100, blockMs: 200 }, logs.logger);
    const w2 = await startWorker(SixPartitions, { consumer: 'w2', keyPrefix: prefix, batchSize: 100, blockMs: 200 }, logs.logger);
    const producer = client({ keyPrefix: prefix, partitions: { orders: 6 } });
    const total = 20_000;
    const ids = new Array<string>(total);
    for (let from = 0; from < total; from += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, async (_, j) => {
          const i = from + j;
          ids[i] = await lastValueFrom(
            producer.emit('orders', new RedisStreamsRecord({ i, customer: `c${i % 1000}` }, {}, { partitionKey: `c${i % 1000}` })),
          );
        }),
      );
    }
    const calls = () => [...w1.seen.calls, ...w2.seen.calls];
    await waitFor(() => calls().length >= total, { message: `${total} handled`, timeoutMs: 30_000, progress: () => calls().length });

    const all = calls();
    const byEntry = new Map<string, Seen[]>();
    for (const c of all) byEntry.set(`${c.stream} ${c.id}`, [...(byEntry.get(`${c.stream} ${c.id}`) ?? []), c]);
    const twice = [...byEntry].filter(([, cs]) => cs.length > 1);
    const about = twice
      .slice(0, 20)
      .map(([entry, cs]) => `${entry}: ${cs.map((c) => `${c.consumer} delivery ${c.deliveryCount}`).join(', ')}`);
    const said = logs.lines.filter((l) => !l.startsWith('log ')).slice(0, 60);
    expect(
      twice.length,
      [`${twice.length} entries handled more than once`, ...about, '--- what the workers said ---', ...said].join('\n'),
    ).toBe(0);
    expect(all).toHaveLength(total);
    expect(new Set(all.map((c) => (c.payload as { i: number }).i)).size).toBe(total);
    expect(new Set(all.map((c) => `${c.stream} ${c.id}`)).size).toBe(total);
    const partitionsOfKey = new Map<string, Set<number>>();
    for (const c of all) {
      const { customer } = c.payload as { customer: string };
      expect(c.pattern).toBe('orders');
      expect(c.stream).toBe(partitionKey(prefix, 'orders', c.partition!));
      partitionsOfKey.set(customer, (partitionsOfKey.get(customer) ?? new Set()).add(c.partition!));
    }
    expect(partitionsOfKey.size).toBe(1000);
    expect([...partitionsOfKey.values()].every((p) => p.size === 1)).toBe(true);
    // Every partition got work, so every master did.
    expect(new Set(all.map((c) => c.partition))).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    expect(new Set(all.map((c) => c.consumer))).toEqual(new Set(['w1', 'w2']));
    const admin = cluster.client();
    for (let i = 0; i < 6; i++) expect(((await admin.xpending(partitionKey(prefix, 'orders', i), 'g')) as [number])[0]).toBe(0);
  }, 600_000);

  it('changing the partition count loses nothing when the old partitions are drained before they are dropped (the documented procedure)', async () => {
    const prefix = uniquePrefix();
    let release!: () => void;
    const old = await startWorker(FourPartitions, { consumer: 'w', keyPrefix: prefix, batchSize: 50, blockMs: 200 });
    old.seen.gate = new Promise((resolve) => (release = () => resolve(undefined)));
    // Producers on 4 partitions write while the consumer is busy: entries wait in all four.
    const before = client({ keyPrefix: prefix, partitions: { orders: 4 } });
    for (let i = 0; i < 400; i++) await lastValueFrom(before.emit('orders', { i }));
    // Step 1: producers move to 2 partitions; partitions 2 and 3 get no new entries.
    const after = client({ keyPrefix: prefix, partitions: { orders: 2 } });
    for (let i = 400; i < 600; i++) await lastValueFrom(after.emit('orders', { i }));
    release();
    // Step 2: consumers still read 4 partitions until partitions 2 and 3 have no lag and nothing pending.
    const admin = cluster.client();
    const drained = async (key: string) => {
      const [group] = (await admin.xinfo('GROUPS', key)) as unknown[][];
      const info = Object.fromEntries(
        (group as unknown[]).reduce<[unknown, unknown][]>((acc, v, i, arr) => (i % 2 === 0 ? [...acc, [v, arr[i + 1]]] : acc), []),
      );
      return info.lag === 0 && info.pending === 0;
    };
    await waitFor(async () => (await drained(partitionKey(prefix, 'orders', 2))) && (await drained(partitionKey(prefix, 'orders', 3))), {
      message: 'partitions 2 and 3 drained',
      timeoutMs: 20_000,
    });
    // Step 3: consumers move to 2 partitions; step 4: the old keys go.
    await old.close();
    const next = await startWorker(TwoPartitions, { consumer: 'w', keyPrefix: prefix, blockMs: 200 });
    await admin.del(partitionKey(prefix, 'orders', 2));
    await admin.del(partitionKey(prefix, 'orders', 3));
    for (let i = 600; i < 700; i++) await lastValueFrom(after.emit('orders', { i }));
    const handled = () => [...old.seen.calls, ...next.seen.calls].map((c) => (c.payload as { i: number }).i);
    await waitFor(() => new Set(handled()).size === 700, { message: 'all 700 handled', timeoutMs: 20_000 });
    expect(handled()).toHaveLength(700);
  }, 60_000);

  it("keeps dead letters in their stream's slot ({stream}:dead), and DeadLetters finds them under either name", async () => {
    const prefix = uniquePrefix();
    const worker = await startWorker(ThreeStreams, { consumer: 'c1', keyPrefix: prefix, blockMs: 200, maxDeliveries: 1 });
    worker.seen.gate = Promise.reject(new Error('poison'));
    worker.seen.gate.catch(() => undefined);
    const admin = cluster.client();
    await admin.xadd(`${prefix}a`, '*', 'n', '1');
    const dead = `{${prefix}a}:dead`;
    await waitFor(async () => (await admin.xlen(dead)) === 1, { message: 'the dead letter' });
    expect(await cluster.keySlot(dead)).toBe(await cluster.keySlot(`${prefix}a`));
    expect(await new DeadLetters(admin).find(`${prefix}a`)).toEqual([dead]);
    // A dead-letter stream written by a single-node deployment (`<stream>:dead`) is found too.
    await admin.xadd(`${prefix}a:dead`, '*', 'stream', `${prefix}a`);
    expect(await new DeadLetters(admin).find(`${prefix}a`)).toEqual([`${prefix}a:dead`, dead]);
  });

  it('refuses to start when a dead-letter stream would be in another slot than its stream, naming both', async () => {
    await expect(
      startWorker(ThreeStreams, { consumer: 'c1', keyPrefix: uniquePrefix(), deadLetterStream: (s) => `dead:${s}` }),
    ).rejects.toThrow(/dead-letter stream "dead:.*a" of ".*a" is in another cluster slot/);
  });

  it('close() while XGROUP CREATE is in flight on the masters resolves', async () => {
    const admins = (await cluster.masters()).map((port) => cluster.node(port));
    const moduleRef = await Test.createTestingModule({ controllers: [ThreeStreams], providers: [Seen$] }).compile();
    const server = new RedisStreamsServer({
      connection: cluster.urls,
      group: 'g',
      consumer: 'c1',
      keyPrefix: uniquePrefix(),
      blockMs: 500,
    });
    const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    for (const admin of admins) await admin.call('CLIENT', 'PAUSE', '20000', 'WRITE');
    onTestFinished(async () => void (await Promise.all(admins.map((a) => a.call('CLIENT', 'UNPAUSE')))));
    const listening = app.listen().then(
      () => 'resolved',
      (err: Error) => err.message,
    );
    await waitFor(
      async () =>
        (await Promise.all(admins.map((a) => a.call('CLIENT', 'LIST', 'TYPE', 'normal')))).some((list) => /cmd=xgroup/.test(String(list))),
      {
        message: 'XGROUP CREATE in flight',
      },
    );
    const closing = server.close();
    for (const admin of admins) await admin.call('CLIENT', 'UNPAUSE');
    let closed = false;
    void closing.then(() => (closed = true));
    await waitFor(() => closed, { message: 'close() to resolve', timeoutMs: 15_000 });
    expect(await listening).toMatch(/closed before it started/);
  });

  it('a one-node URL of a cluster node fails the start at once (MOVED needs a human there), saying to pass the cluster', async () => {
    const port = (await cluster.masters())[0]!;
    const startupTimeoutMs = 60_000;
    let prefix: string;
    do prefix = uniquePrefix();
    while (
      (await cluster.masterOf(`${prefix}a`)) === port &&
      (await cluster.masterOf(`${prefix}b`)) === port &&
      (await cluster.masterOf(`${prefix}c`)) === port
    );
    const { value: error, ms } = await timed(() =>
      startWorker(ThreeStreams, {
        consumer: 'c1',
        keyPrefix: prefix,
        connection: `redis://127.0.0.1:${port}`,
        startupTimeoutMs,
      }).then(
        () => undefined,
        (err: Error) => err,
      ),
    );
    expect(error?.message).toMatch(/^MOVED .*a cluster node: pass the cluster's node URLs/);
    // At once, not after retrying until startupTimeoutMs (a minute): a sixth of it is room for a busy machine.
    expect(ms).toBeLessThan(startupTimeoutMs / 6);
  }, 120_000);

  it('cluster URLs of a server without cluster mode fail the start clearly, and close() does not wait commandTimeoutMs', async () => {
    // Both a minute: a start or a close that waited for either would take that long.
    const startupTimeoutMs = 60_000;
    const commandTimeoutMs = 60_000;
    const { value: error, ms } = await timed(() =>
      startWorker(ThreeStreams, {
        consumer: 'c1',
        keyPrefix: uniquePrefix(),
        connection: [single.url],
        startupTimeoutMs,
        commandTimeoutMs,
      }).then(
        () => undefined,
        (err: Error) => err,
      ),
    );
    // Redis' own answer, at once: the server is up, its mode is wrong. A sixth of a minute is room for a busy machine.
    expect(error?.message).toMatch(/cluster support disabled/);
    expect(ms).toBeLessThan(startupTimeoutMs / 6);
  }, 120_000);

  it.each(['x{}y', 'a}b', '{}orders', 'a{b'])(
    'starts a stream with odd braces ("%s") and dead-letters it into its own slot',
    async (pattern) => {
      @Controller()
      class Odd {
        constructor(private readonly seen: Seen$) {}
        @StreamPattern(pattern)
        h(@Payload() p: unknown, @Ctx() ctx: RedisStreamsContext) {
          return this.seen.record(p, ctx);
        }
      }
      const prefix = uniquePrefix();
      const worker = await startWorker(Odd, { consumer: 'c1', keyPrefix: prefix, blockMs: 200, maxDeliveries: 1 });
      worker.seen.gate = Promise.reject(new Error('poison'));
      worker.seen.gate.catch(() => undefined);
      const admin = cluster.client();
      await admin.xadd(prefix + pattern, '*', 'n', '1');
      await waitFor(() => worker.seen.calls.length === 1, { message: 'the entry to be handled' });
      const [dead] = await waitFor(
        async () => (await new DeadLetters(admin).find(prefix + pattern)).filter((key) => key !== `${prefix + pattern}:dead`),
        { message: 'its dead-letter stream' },
      );
      expect(await cluster.keySlot(dead!)).toBe(await cluster.keySlot(prefix + pattern));
      expect(await admin.xlen(dead!)).toBe(1);
    },
  );

  it('refuses partitions under a keyPrefix whose hash tag would put them all in one slot', async () => {
    await expect(startWorker(SixPartitions, { consumer: 'c1', keyPrefix: `{${uniquePrefix()}}:` })).rejects.toThrow(
      /keyPrefix .* hash tag: the 6 partitions of "orders" would all share one slot/,
    );
  });

  it('re-drives dead letters a one-node deployment left in "<stream>:dead" (another slot), with the CLI', async () => {
    const prefix = uniquePrefix();
    const admin = cluster.client();
    const stream = `${prefix}orders`;
    const legacy = `${stream}:dead`;
    expect(await cluster.keySlot(legacy)).not.toBe(await cluster.keySlot(stream));
    await admin.xadd(
      legacy,
      '*',
      'stream',
      stream,
      'sourceId',
      '1-1',
      'group',
      'g',
      'consumer',
      'c',
      'deliveryCount',
      '5',
      'error',
      'x',
      'fields',
      JSON.stringify(['data', '{"n":1}']),
      'deadAt',
      String(Date.now()),
    );
    const script = requireBuilt('libs/redis-streams/dist/esm/cli/dlq.js');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [script, 'redrive', legacy, '--all', '--json', '--cluster', cluster.urls.join(',')],
      { cwd: repoRoot },
    );
    expect(JSON.parse(stdout.trim())).toMatchObject({ stream, newId: expect.stringMatching(/^\d+-\d+$/) });
    expect(await admin.xlen(stream)).toBe(1);
    expect(await admin.xlen(legacy)).toBe(0);
  });

  it('warns at start about entries under the keys of another partition count (a client and a server that disagree)', async () => {
    const prefix = uniquePrefix();
    const admin = cluster.client();
    // A producer without `partitions` wrote the plain key; one with 8 wrote partition 6.
    await admin.xadd(`${prefix}orders`, '*', 'n', '1');
    await admin.xadd(partitionKey(prefix, 'orders', 6), '*', 'n', '2');
    const logs = captureLogs();
    await startWorker(SixPartitions, { consumer: 'c1', keyPrefix: prefix, blockMs: 200 }, logs.logger);
    await waitFor(() => logs.lines.filter((l) => l.startsWith('warn') && /no handler of this consumer reads/.test(l)).length === 2, {
      message: 'two warnings',
    });
    expect(logs.text()).toContain(`stream "${prefix}orders" holds 1 entry that no handler of this consumer reads`);
    expect(logs.text()).toContain(`stream "${partitionKey(prefix, 'orders', 6)}" holds 1 entry`);
  });

  // Last: it fails masters over. Options a user may pass that change how ioredis follows a moved slot.
  it.each([
    ['maxRedirections: 1', { maxRedirections: 1 }],
    ['enableOfflineQueue: false', { enableOfflineQueue: false }],
    ['clusterRetryStrategy: () => null', { clusterRetryStrategy: () => null }],
  ] as const)(
    'heals after a manual failover with %s',
    async (_name, options) => {
      const prefix = uniquePrefix();
      const logs = captureLogs();
      const worker = await startWorker(
        ThreeStreams,
        { consumer: 'c1', keyPrefix: prefix, blockMs: 1000, connection: { cluster: cluster.nodes, options } },
        logs.logger,
      );
      const admin = cluster.client();
      await waitParked(admin, 'g:c1:', 'three parked lanes', 3);
      await cluster.failover(`${prefix}a`);
      const id = await admin.xadd(`${prefix}a`, '*', 'n', 'after');
      await waitFor(() => worker.seen.calls.some((c) => c.id === id), {
        message: 'the entry written after the failover',
        timeoutMs: 15_000,
      }).catch((err: Error) => {
        throw new Error(
          `${err.message}; last warnings: ${logs.lines
            .filter((l) => l.startsWith('warn'))
            .slice(-3)
            .join(' | ')}`,
        );
      });
    },
    30_000,
  );
});
