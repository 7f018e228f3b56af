/**
 * Autoscaling on lag (docs/guide/autoscaling.md): the figures KEDA's scalers would read, read as they read
 * them, against the backlog the test made. Not KEDA itself: its redis-streams scaler's commands (XINFO GROUPS'
 * `lag` for `lagCount`, XPENDING's count for `pendingEntriesCount`) and its metrics-api scaler's JSON value
 * (`patterns.#(pattern=="…").lag` of the health JSON, served over HTTP). Runs on Redis 7.0 (npm test), Valkey 8
 * (TEST_SET=valkey8) and Redis 8.6 (TEST_SET=newer): what XINFO's lag does after trimming, XDEL and a failover
 * differs between them, and each test says how.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { partitionKeys, type RedisStreamsHealth } from 'nestjs-redis-streams';
import { parseGroupInfo } from '../libs/redis-streams/src/redis/replies/info-replies.js';
import { consumerOptions } from './support/consumer-options.js';
import { gate } from './support/gate.js';
import { startReplicated, type ReplicatedRedis } from './support/redis-replica.js';
import { probeServerFeatures } from './support/server-probe.js';
import { uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const features = await probeServerFeatures();
const REDIS_70 = features.server.startsWith('Redis 7.0');
const VALKEY_9 = features.server.startsWith('Valkey 9');
/** Unread entries trimmed away stay in XINFO's lag until the group reads on (redis_version 7.x: Redis 7.0, Valkey 8 and 9; Redis 7.2/7.4 not run here). */
const TRIMMED_COUNTED = features.major < 8;
/** Unread entries removed (trimmed, or the next one deleted) stay in it for good on Redis 7.0 and Valkey 8: the group's read counter never catches up. */
const REMOVED_COUNTED_FOR_GOOD = TRIMMED_COUNTED && !VALKEY_9;
const redis = useRedis();
const start = useApps();

/**
 * What KEDA's redis-streams scaler reads with `lagCount` (pkg/scalers/redis_streams_scaler.go): the group's
 * XINFO GROUPS `lag`; the stream missing, 0; the group missing, XLEN. go-redis (9.9 and later) gives a nil lag
 * as -1, which KEDA passes on: `raw` is the reply, `value` the metric KEDA would report.
 */
async function kedaLag(r: Redis, stream: string, group = 'g'): Promise<{ raw: number | null; value: number }> {
  if ((await r.exists(stream)) === 0) return { raw: 0, value: 0 };
  const info = parseGroupInfo(await r.xinfo('GROUPS', stream), group);
  if (!info) {
    const length = await r.xlen(stream);
    return { raw: length, value: length };
  }
  return { raw: info.reportedLag, value: info.reportedLag ?? -1 };
}

/** What it reads with `pendingEntriesCount`: XPENDING's summary count. */
async function kedaPending(r: Redis, stream: string, group = 'g'): Promise<number> {
  const [count] = (await r.xpending(stream, group)) as [number, ...unknown[]];
  return Number(count);
}

/** KEDA's activation: a scaler is active (keeps or brings replicas from zero) when its value is above `activationLagCount` (default 0). */
const active = (value: number, activation = 0): boolean => value > activation;

/**
 * The one GJSON form the guide uses, `<array>.#(<field>=="<value>").<key>`, resolved as GJSON does, and held to
 * what KEDA's metrics-api scaler accepts: a JSON number (anything else, `null` among them, is an error there).
 */
function gjsonNumber(body: unknown, path: string): number {
  const match = /^(\w+)\.#\((\w+)=="([^"]*)"\)\.(\w+)$/.exec(path);
  if (!match) throw new Error(`not the form the guide uses: ${path}`);
  const [, array, field, value, key] = match;
  const rows = (body as Record<string, unknown>)[array!];
  const row = Array.isArray(rows) ? rows.find((r: Record<string, unknown>) => r[field!] === value) : undefined;
  const found: unknown = row?.[key!];
  if (typeof found !== 'number') throw new Error(`valueLocation "${path}" must point to a numeric value, got ${JSON.stringify(found)}`);
  return found;
}

/** The guide's autoscaling endpoint: `server.health()` as JSON, 200 whatever the verdict (KEDA reads only a 200). */
async function serveHealth(app: TestApp): Promise<{
  read: (pattern: string, figure: 'lag' | 'pending') => Promise<number>;
  drained: (pattern: string) => Promise<void>;
  close: () => Promise<void>;
}> {
  const server: Server = createServer((_req, res) => {
    app.consumer.health().then(
      (health: RedisStreamsHealth) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(health));
      },
      (err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/autoscaling`;
  const read = async (pattern: string, figure: 'lag' | 'pending') => {
    const res = await fetch(url);
    if (res.status !== 200) throw new Error(`api returned ${res.status}`);
    return gjsonNumber(await res.json(), `patterns.#(pattern=="${pattern}").${figure}`);
  };
  return {
    read,
    drained: async (pattern) => {
      await waitFor(async () => (await read(pattern, 'lag')) === 0 && (await read(pattern, 'pending')) === 0, {
        message: 'the JSON drained',
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Writes `n` entries to `key` (raw XADD, as any producer). */
async function write(r: Redis, key: string, n: number, field = 'n'): Promise<void> {
  const pipeline = r.pipeline();
  for (let i = 0; i < n; i++) pipeline.xadd(key, '*', field, String(i));
  await pipeline.exec();
}

const acked = (app: TestApp, key: string): number => app.settled.filter((e) => e.stream === key && e.outcome === 'acked').length;

/** A worker of `jobs` that acked 2 entries, then paused: what is written next stays unread. */
async function pausedAfterTwo(): Promise<{ app: TestApp; key: string; admin: Redis; api: Awaited<ReturnType<typeof serveHealth>> }> {
  const app = await start(consumerOptions(redis, { blockMs: 50 }), { defaults: false, handlers: [{ pattern: 'jobs' }] });
  const key = app.key('jobs');
  const admin = redis.client();
  const api = await serveHealth(app);
  await write(admin, key, 2);
  await waitFor(() => acked(app, key) === 2, { message: '2 entries acked' });
  await app.consumer.pause('jobs');
  return { app, key, admin, api };
}

describe('the figures an autoscaler reads, against the real backlog', () => {
  it('plain, partitioned and ordered patterns: entries unread and in hand, then drained', async () => {
    const prefix = uniquePrefix();
    const jobs = [`${prefix}jobs`];
    const parts = partitionKeys(prefix, 'parts', 3);
    const seq = partitionKeys(prefix, 'seq', 2);
    const written = new Map<string, number>([
      ...jobs.map((k) => [k, 7] as const),
      ...parts.map((k) => [k, 5] as const),
      ...seq.map((k) => [k, 4] as const),
    ]);
    const admin = redis.client();
    // Written before the worker starts (its groups read from the start): its first read takes a batch of every stream.
    for (const [key, n] of written) await write(admin, key, n);
    const { wait: released, open: release } = gate();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, batchSize: 2, concurrency: 2, readAhead: false }), {
      defaults: false,
      // Each handler held until the test releases it (given before the start: the first read comes at once).
      handlers: [
        { pattern: 'jobs', handle: () => released },
        { pattern: 'parts', extras: { partitions: 3 }, handle: () => released },
        { pattern: 'seq', extras: { partitions: 2, ordered: true }, handle: () => released },
      ],
    });
    const api = await serveHealth(app);
    try {
      // The handlers are held and nothing is read ahead, so the reads stop with entries in hand on every stream. When
      // the last of them lands is the machine's affair (a busy one sends it late), so each look reads what the worker
      // holds before and after the figures, and counts only when nothing moved in between; it is retried until
      // every stream has entries in hand and the figures agree with them (a disagreement that lasts fails, with it).
      const keys = [...written.keys()];
      const held = async () => {
        const h = await app.consumer.health({ stats: false });
        return keys.map((k) => h.streams.find((s) => s.stream === k)?.inHand ?? 0);
      };
      const patterns = [
        ['jobs', jobs],
        ['parts', parts],
        ['seq', seq],
      ] as const;
      const inHand = await waitFor(
        async () => {
          const before = await held();
          if (!before.every((n) => n > 0)) throw new Error(`entries in hand ${JSON.stringify(before)}`);
          // The backlog as the worker holds it: what it has in hand is delivered and not acked, the rest is unread.
          const streams = [];
          for (const key of keys) streams.push({ key, lag: await kedaLag(admin, key), pending: await kedaPending(admin, key) });
          // One trigger per stream cannot add up a pattern: the health JSON does.
          const sums = [];
          for (const [pattern] of patterns)
            sums.push({ pattern, lag: await api.read(pattern, 'lag'), pending: await api.read(pattern, 'pending') });
          const after = await held();
          if (JSON.stringify(after) !== JSON.stringify(before))
            throw new Error(`entries in hand moved: ${JSON.stringify([before, after])}`);
          const hand = new Map(keys.map((k, i) => [k, before[i]!]));
          const lagOf = (ks: readonly string[]) => ks.reduce((total, k) => total + written.get(k)! - hand.get(k)!, 0);
          const pendingOf = (ks: readonly string[]) => ks.reduce((total, k) => total + hand.get(k)!, 0);
          const want = {
            streams: keys.map((key) => ({
              key,
              lag: { raw: written.get(key)! - hand.get(key)!, value: written.get(key)! - hand.get(key)! },
              pending: hand.get(key)!,
            })),
            sums: patterns.map(([pattern, ks]) => ({ pattern, lag: lagOf(ks), pending: pendingOf(ks) })),
          };
          const got = JSON.stringify({ streams, sums });
          if (got !== JSON.stringify(want)) throw new Error(`figures ${got}, in hand ${JSON.stringify(before)}`);
          return hand;
        },
        { message: 'entries in hand on every stream, and the figures KEDA and the health JSON read agreeing with them' },
      );
      const lagOf = (ks: readonly string[]) => ks.reduce((total, k) => total + written.get(k)! - inHand.get(k)!, 0);
      // Something unread on each pattern (a trigger per stream would see each partition's alone).
      expect([lagOf(jobs), lagOf(parts)].every((n) => n > 0)).toBe(true);
      const health = await app.consumer.health();
      expect(health.patterns.map((p) => [p.pattern, p.streams])).toEqual([
        ['jobs', 1],
        ['parts', 3],
        ['seq', 2],
      ]);
    } finally {
      release(); // before afterEach closes the app, which waits for the entries in hand
    }
    await waitFor(async () => [...written].every(([key, n]) => acked(app, key) === n), { message: 'every entry acked' });
    for (const key of written.keys()) {
      const lag = await kedaLag(admin, key);
      expect({ key, lag, pending: await kedaPending(admin, key), active: active(lag.value) }).toEqual({
        key,
        lag: { raw: 0, value: 0 },
        pending: 0,
        active: false,
      });
    }
    await api.drained('parts');
    for (const pattern of ['jobs', 'seq']) expect([await api.read(pattern, 'lag'), await api.read(pattern, 'pending')]).toEqual([0, 0]);
    await api.close();
  });

  it('trimming unread entries: XINFO lag counts them forever on Redis 7.0 and Valkey 8, never on Redis 8.6; the health JSON counts what is there', async () => {
    const { app, key, admin, api } = await pausedAfterTwo();
    await write(admin, key, 10);
    // A blind producer's trim (`MAXLEN`, not the safe retention): 2 acked entries and 5 unread ones go.
    expect(await admin.xtrim(key, 'MAXLEN', 5)).toBe(7);
    const unread = 5;
    const lag = await kedaLag(admin, key);
    // Redis 8.x accounts for trimmed entries; Redis 7.0 and Valkey count them as unread.
    expect(lag).toEqual(TRIMMED_COUNTED ? { raw: unread + 5, value: unread + 5 } : { raw: unread, value: unread });
    expect(await kedaPending(admin, key)).toBe(0);
    expect(await api.read('jobs', 'lag')).toBe(unread);

    await app.consumer.resume('jobs');
    await waitFor(() => acked(app, key) === 2 + unread, { message: 'the 5 left handled' });
    // Read to the end and acked: nothing left, but Redis 7.0 and Valkey 8 keep the trimmed 5 in XINFO's lag.
    const after = await kedaLag(admin, key);
    expect(after).toEqual(REMOVED_COUNTED_FOR_GOOD ? { raw: 5, value: 5 } : { raw: 0, value: 0 });
    expect(active(after.value)).toBe(REMOVED_COUNTED_FOR_GOOD);
    await api.drained('jobs');
    await api.close();
  });

  it('the next unread entry deleted (XDEL): XINFO lag is nil (KEDA reads -1, inactive), then one too many for good on Redis 7.0 and Valkey 8', async () => {
    const { app, key, admin, api } = await pausedAfterTwo();
    await write(admin, key, 6);
    // The first of the 6: the group's next entry to read.
    const [, , next] = (await admin.xrange(key, '-', '+')).map(([id]) => id);
    expect(await admin.xdel(key, next!)).toBe(1);
    const lag = await kedaLag(admin, key);
    expect(lag).toEqual({ raw: null, value: -1 });
    expect(active(lag.value)).toBe(false);
    expect(await api.read('jobs', 'lag')).toBe(5);
    // Read past the deleted one (another consumer of the group reads one and acks it): Redis 8.6 and Valkey 9 stay
    // nil until the group has read to the end, not once past it (review measurement).
    const reply = (await admin.xreadgroup('GROUP', 'g', 'probe', 'COUNT', 1, 'STREAMS', key, '>')) as [string, [string, string[]][]][];
    expect(await admin.xack(key, 'g', reply[0]![1][0]![0])).toBe(1);
    if (!REMOVED_COUNTED_FOR_GOOD) expect(await kedaLag(admin, key)).toEqual({ raw: null, value: -1 });
    await waitFor(async () => (await api.read('jobs', 'lag')) === 4, { message: 'the health JSON to count 4 unread' });
    await app.consumer.resume('jobs');
    await waitFor(() => acked(app, key) === 2 + 4, { message: 'the 4 left handled' });
    // Read to the end: Redis 7.0 and Valkey 8 counted on from the deleted entry and keep it as unread.
    const after = await kedaLag(admin, key);
    expect(after).toEqual(REMOVED_COUNTED_FOR_GOOD ? { raw: 1, value: 1 } : { raw: 0, value: 0 });
    await api.drained('jobs');
    await api.close();
  });

  describe.runIf(features.ackDelete)('deleteOnAck (Redis 8.2+)', () => {
    it('an older entry still pending under acked-and-deleted ones: XINFO lag is nil, KEDA reads -1; XPENDING and the health JSON are right', async () => {
      const prefix = uniquePrefix();
      const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, deleteOnAck: 'this-group' }), {
        defaults: false,
        handlers: [{ pattern: 'jobs' }, { pattern: 'parts', extras: { partitions: 2 } }],
      });
      const { RetryLaterException } = await import('nestjs-redis-streams');
      const { RetryLaterError } = await import('nestjs-redis-streams/core');
      // The first entry of each stream waits for a retry (pending), the others are acked and deleted.
      app.recorder.behavior = (call) => {
        if (call.fields.kind === 'retry') throw app.host === 'core' ? new RetryLaterError(600_000) : new RetryLaterException(600_000);
        return undefined;
      };
      const admin = redis.client();
      const api = await serveHealth(app);
      const keys = [app.key('jobs'), ...partitionKeys(prefix, 'parts', 2)];
      for (const key of keys) await admin.xadd(key, '*', 'kind', 'retry');
      await waitFor(() => keys.every((k) => app.settled.some((e) => e.stream === k && e.outcome === 'failed')), {
        message: 'a retry waiting on every stream',
      });
      for (const key of keys) await write(admin, key, 3);
      await waitFor(() => keys.every((k) => acked(app, k) === 3), { message: '3 acked (and deleted) on every stream' });
      await app.consumer.pause('jobs');
      await app.consumer.pause('parts');
      for (const key of keys) await write(admin, key, 4);
      for (const key of keys) {
        // In the stream: the waiting entry and the 4 unread ones; the 3 acked are gone.
        expect(await admin.xlen(key)).toBe(5);
        const lag = await kedaLag(admin, key);
        expect({ key, lag, active: active(lag.value), pending: await kedaPending(admin, key) }).toEqual({
          key,
          lag: { raw: null, value: -1 },
          active: false,
          pending: 1,
        });
      }
      expect([await api.read('jobs', 'lag'), await api.read('jobs', 'pending')]).toEqual([4, 1]);
      expect([await api.read('parts', 'lag'), await api.read('parts', 'pending')]).toEqual([8, 2]);
      await api.close();
    });
  });
});

describe('after a failover', () => {
  let pair: ReplicatedRedis | undefined;
  afterAll(async () => {
    await pair?.stop();
  });

  it('the promoted replica’s XINFO lag: nil on Redis 7.0 (KEDA reads -1), right on Valkey 8 and Redis 8.6; the health JSON counts', async () => {
    pair = await startReplicated();
    await pair.addReplica();
    const prefix = uniquePrefix();
    const options = { group: 'g', keyPrefix: prefix, blockMs: 50 };
    const first = await start({ connection: pair.master.url, ...options }, { defaults: false, handlers: [{ pattern: 'jobs' }] });
    const key = first.key('jobs');
    const master = pair.master.client();
    await write(master, key, 3);
    await waitFor(() => acked(first, key) === 3, { message: '3 entries acked on the master' });
    // Paused for the group (a key, replicated): the worker started on the promoted node reads nothing either.
    await first.consumer.pause('jobs');
    await write(master, key, 5);
    await first.close();
    await pair.synced();
    await pair.failover();

    const promoted = pair.replica.client();
    const lag = await kedaLag(promoted, key);
    // Redis 7.0 replicates a group's reads without entries-read: unknown on the replica until the group reads to the end.
    const lost = REDIS_70;
    expect(lag).toEqual(lost ? { raw: null, value: -1 } : { raw: 5, value: 5 });
    expect(active(lag.value)).toBe(!lost);
    const second = await start({ connection: pair.replica.url, ...options }, { defaults: false, handlers: [{ pattern: 'jobs' }] });
    const api = await serveHealth(second);
    try {
      expect([await api.read('jobs', 'lag'), await api.read('jobs', 'pending')]).toEqual([5, 0]);
      await second.consumer.resume('jobs');
      await waitFor(() => acked(second, key) === 5, { message: 'the 5 handled on the promoted node' });
      expect(await kedaLag(promoted, key)).toEqual({ raw: 0, value: 0 });
    } finally {
      await api.close();
    }
  });
});
