// Idempotent produce (a record's idempotencyKey): XADD … IDMP on Redis 8.6, the keyed-expiry script elsewhere.
// Each guarantee is tested on both paths: `idmp` where the server has it, `script` everywhere (on Redis 8.6
// through newerCommands: false, on Redis 7 / Valkey by itself).
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import {
  partitionKeys,
  partitionOf,
  RedisStreamsClient,
  RedisStreamsRecord,
  serveDashboard,
  type RedisStreamsClientOptions,
} from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { requireBuilt, repoRoot } from './support/built.js';
import { aclUser, PRODUCER_ACL } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { useProducers } from './support/producer.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';
import { parseInfoRecord } from '../libs/redis-streams/src/redis/replies/info-replies.js';
import type { StreamReport } from '../libs/redis-streams/src/ops/stream-reports.js';
import { runCli } from './support/cli.js';
import { EntryCommands } from '../libs/redis-streams/src/redis/tools/entry-commands.js';
import { DelayedCommands } from '../libs/redis-streams/src/redis/upkeep/delayed-commands.js';
import { delayedKeysOf } from '../libs/redis-streams/src/key-names.js';

const redis = useRedis();
const producer = useProducers();
const start = useApps();

/** Whether the file's server has XADD … IDMP (read once: the transport asks COMMAND INFO the same way). */
let serverHasIdmp = false;
beforeAll(async () => {
  const [row] = (await redis.client().call('COMMAND', 'INFO', 'XCFGSET')) as unknown[];
  serverHasIdmp = Array.isArray(row) && row.length > 0;
});

const once = (data: unknown, idempotencyKey: string, partitionKey?: string) =>
  new RedisStreamsRecord(data, {}, { idempotencyKey, ...(partitionKey === undefined ? {} : { partitionKey }) });

/** Where the script keeps a key's first id (docs/wire-format.md); on a cluster the untagged stream's name becomes the tag. */
const recordKey = (stream: string, key: string, producerId = 'nestjs-redis-streams') =>
  `${redis.cluster ? `{${stream}}` : stream}:idmp:${producerId}:${key}`;

/** XINFO STREAM as a record. */
const streamInfo = async (key: string) => parseInfoRecord(await redis.client().xinfo('STREAM', key));

/** A child process's client (the built library): emits `key` to `pattern` and prints the id. */
const CHILD = `
const [lib, rxjs, options, pattern, key] = process.argv.slice(1);
const { RedisStreamsClient, RedisStreamsRecord } = await import(lib);
const { lastValueFrom } = await import(rxjs);
const client = new RedisStreamsClient(JSON.parse(options));
try {
  await client.connect();
  console.log(await lastValueFrom(client.emit(pattern, new RedisStreamsRecord({ from: 'child' }, {}, { idempotencyKey: key }))));
} finally {
  await client.close();
}`;
async function emitFromChild(options: RedisStreamsClientOptions, pattern: string, key: string): Promise<string> {
  const lib = pathToFileURL(requireBuilt('libs/redis-streams/dist/esm/index.js')).href;
  const rxjs = pathToFileURL(createRequire(`${repoRoot}package.json`).resolve('rxjs')).href;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--input-type=module', '-e', CHILD, lib, rxjs, JSON.stringify(options), pattern, key],
    // Loading Nest takes a second of CPU: on a busy machine, many more.
    { cwd: repoRoot, timeout: 60_000, killSignal: 'SIGKILL' },
  );
  return stdout.trim();
}

for (const path of ['idmp', 'script'] as const) {
  describe(`idempotent produce (${path === 'idmp' ? 'XADD … IDMP' : 'the keyed-expiry script'})`, () => {
    /** The client options that take this path; the test is skipped where the server has no such path. */
    const optionsOf = (ctx: { skip: () => void }, extra: RedisStreamsClientOptions = {}): RedisStreamsClientOptions => {
      if (path === 'idmp' && !serverHasIdmp) ctx.skip();
      return { connection: redis.connection, ...(path === 'script' && serverHasIdmp ? { newerCommands: false } : {}), ...extra };
    };

    it('a repeat writes nothing and resolves with the first entry id; another key writes', async (ctx) => {
      const prefix = uniquePrefix();
      const { client } = await producer(optionsOf(ctx, { keyPrefix: prefix }));
      const first = await lastValueFrom(client.emit('orders', once({ n: 1 }, 'order-42')));
      // Another payload under the same key: still the first entry.
      expect(await lastValueFrom(client.emit('orders', once({ n: 2 }, 'order-42')))).toBe(first);
      const other = await lastValueFrom(client.emit('orders', once({ n: 3 }, 'order-43')));
      expect(other).not.toBe(first);
      const entries = await redis.client().xrange(`${prefix}orders`, '-', '+');
      expect(entries.map(([id, fields]) => [id, fields[1]])).toEqual([
        [first, '{"n":1}'],
        [other, '{"n":3}'],
      ]);
      // A plain emit is untouched by the keys.
      await lastValueFrom(client.emit('orders', { n: 4 }));
      expect(await redis.client().xlen(`${prefix}orders`)).toBe(3);
    });

    it('holds across a producer restart: a new client and another process get the first id', async (ctx) => {
      const prefix = uniquePrefix();
      const options = optionsOf(ctx, { keyPrefix: prefix });
      const a = await producer(options);
      const first = await lastValueFrom(a.client.emit('orders', once({ n: 1 }, 'k')));
      await a.close();
      const b = await producer(options);
      expect(await lastValueFrom(b.client.emit('orders', once({ n: 2 }, 'k')))).toBe(first);
      expect(await emitFromChild(options, 'orders', 'k')).toBe(first);
      expect(await redis.client().xlen(`${prefix}orders`)).toBe(1);
    }, 90_000);

    it('concurrent repeats from two clients write one entry per key, and every caller gets its id', async (ctx) => {
      const prefix = uniquePrefix();
      const options = optionsOf(ctx, { keyPrefix: prefix });
      const [a, b] = await Promise.all([producer(options), producer(options)]);
      const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
      const writes = keys.flatMap((key) =>
        [a, b].flatMap(({ client }) =>
          Array.from({ length: 5 }, (_, n) => lastValueFrom(client.emit('orders', once({ key, n }, key))).then((id) => [key, id] as const)),
        ),
      );
      const ids = new Map<string, Set<string>>();
      for (const [key, id] of await Promise.all(writes)) ids.set(key, (ids.get(key) ?? new Set()).add(id));
      expect([...ids.values()].map((s) => s.size)).toEqual(keys.map(() => 1));
      const entries = await redis.client().xrange(`${prefix}orders`, '-', '+');
      expect(entries.map(([id]) => id).sort()).toEqual([...ids.values()].map((s) => [...s][0]).sort());
    });

    it('partitions: a key routes a record that names no partition key; the same key under two partition keys is two streams', async (ctx) => {
      const prefix = uniquePrefix();
      const { client } = await producer(optionsOf(ctx, { keyPrefix: prefix, partitions: { orders: 4 } }));
      const keys = partitionKeys(prefix, 'orders', 4);
      const lengths = async () => Promise.all(keys.map((k) => redis.client().xlen(k)));
      // No partition key: routed by the idempotency key, so every repeat meets the first in one window.
      const first = await lastValueFrom(client.emit('orders', once({ n: 1 }, 'order-7')));
      for (let n = 0; n < 5; n++) expect(await lastValueFrom(client.emit('orders', once({ n }, 'order-7')))).toBe(first);
      expect((await lengths()).reduce((a, b) => a + b)).toBe(1);
      expect((await lengths())[partitionOf('order-7', 4)]).toBe(1);
      // Partition keys that land apart: each partition has its own window, so both are written.
      const [p, q] = ['a', 'b', 'c', 'd', 'e', 'f'].filter(
        (k, i, all) => all.findIndex((o) => partitionOf(o, 4) === partitionOf(k, 4)) === i,
      );
      const inP = await lastValueFrom(client.emit('orders', once({ n: 1 }, 'order-8', p)));
      expect(await lastValueFrom(client.emit('orders', once({ n: 2 }, 'order-8', p)))).toBe(inP);
      // Written in q's stream (not compared with inP: entries of two streams may get one id, in one millisecond).
      const inQ = await lastValueFrom(client.emit('orders', once({ n: 3 }, 'order-8', q)));
      expect(await redis.client().xrange(keys[partitionOf(q!, 4)]!, inQ, inQ)).toHaveLength(1);
      expect((await lengths()).reduce((a, b) => a + b)).toBe(3);
    });

    it('send: the first request is answered; a repeat fails at once, naming the key and the first entry, and is not handled again', async (ctx) => {
      const prefix = uniquePrefix();
      const options = optionsOf(ctx, { keyPrefix: prefix });
      const app = await start(
        { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100 },
        { controllers: [RequestsController] },
      );
      app.recorder.behavior = (call) => (call.payload as { n: number }).n * 2;
      const { client } = await producer(options);
      expect(await lastValueFrom(client.send('quote', once({ n: 21 }, 'quote-1')))).toBe(42);
      const firstId = (await redis.client().xrange(`${prefix}quote`, '-', '+'))[0]![0];
      await expect(lastValueFrom(client.send('quote', once({ n: 21 }, 'quote-1')))).rejects.toThrow(
        `send to stream "${prefix}quote": idempotency key "quote-1" was used within the window already (entry ${firstId}): the request was not written again`,
      );
      // From another client too (the first sender's replies never reach it).
      const other = await producer(options);
      await expect(lastValueFrom(other.client.send('quote', once({ n: 1 }, 'quote-1')))).rejects.toThrow(
        /was used within the window already/,
      );
      expect(await lastValueFrom(client.send('quote', once({ n: 2 }, 'quote-2')))).toBe(4);
      expect(await redis.client().xlen(`${prefix}quote`)).toBe(2);
      expect(app.recorder.calls.map((c) => c.payload)).toEqual([{ n: 21 }, { n: 2 }]);
    });

    it('a key is forgotten after windowSec: a repeat then writes a new entry', async (ctx) => {
      const prefix = uniquePrefix();
      const { client } = await producer(optionsOf(ctx, { keyPrefix: prefix, idempotency: { windowSec: 1 } }));
      const first = await lastValueFrom(client.emit('orders', once({ n: 1 }, 'k')));
      // Each try before the window ends answers the first id and writes nothing.
      const later = await waitFor(
        async () => {
          const id = await lastValueFrom(client.emit('orders', once({ n: 2 }, 'k')));
          return id !== first && id;
        },
        { intervalMs: 100, message: 'the key forgotten' },
      );
      expect(await redis.client().xrange(`${prefix}orders`, '-', '+')).toEqual([
        [first, ['data', '{"n":1}']],
        [later, ['data', '{"n":2}']],
      ]);
    });

    it('with retention (inline MAXLEN, and the safe trim script in the same round trip): repeats still write nothing', async (ctx) => {
      const prefix = uniquePrefix();
      const { client } = await producer(
        optionsOf(ctx, { keyPrefix: prefix, streamRetention: { plain: { maxLen: 100 }, safe: { maxLen: 100, safe: true } } }),
      );
      for (const pattern of ['plain', 'safe']) {
        const first = await lastValueFrom(client.emit(pattern, once({}, 'k')));
        expect(await lastValueFrom(client.emit(pattern, once({}, 'k')))).toBe(first);
        expect(await redis.client().xlen(`${prefix}${pattern}`)).toBe(1);
      }
    });
  });
}

describe('idempotent produce: what each server takes', () => {
  it('Redis 8.6: XADD … IDMP, with the window of the options set on the stream (even one made by the first write)', async (ctx) => {
    if (!serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const { client } = await producer({
      connection: redis.connection,
      keyPrefix: prefix,
      producerId: 'orders-api',
      idempotency: { windowSec: 120, maxKeys: 50 },
    });
    const key = `${prefix}orders`;
    const first = await lastValueFrom(client.emit('orders', once({}, 'k')));
    expect(await lastValueFrom(client.emit('orders', once({}, 'k')))).toBe(first);
    expect(await streamInfo(key)).toMatchObject({
      length: 1,
      'idmp-duration': 120,
      'idmp-maxsize': 50,
      'pids-tracked': 1,
      'iids-added': 1,
      'iids-duplicates': 1,
    });
    // The server's record, not a key of ours: a raw XADD with the same producer id and key is a repeat too.
    expect(await redis.client().call('XADD', key, 'IDMP', 'orders-api', 'k', '*', 'data', '{}')).toBe(first);
    expect(await redis.client().exists(recordKey(key, 'k', 'orders-api'))).toBe(0);
  });

  it('Redis 8.6: a delayed entry whose key a plain write took meanwhile is promoted as a repeat, not as moved, by the dashboard and by a worker (review finding)', async (ctx) => {
    if (!serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const delayed = (key: string) => new RedisStreamsRecord({ v: 'delayed' }, {}, { idempotencyKey: key, delayMs: 3_600_000 });
    const schedule = delayedKeysOf(stream, redis.cluster).schedule;
    const commands = new EntryCommands(redis.client());
    // The dashboard's promote: the plain write holds the key, so XADD … IDMP writes nothing.
    await lastValueFrom(client.emit('orders', delayed('K')));
    const [member] = await redis.client().zrange(schedule, '0', '-1');
    const plain = await lastValueFrom(client.emit('orders', once({ v: 'plain' }, 'K')));
    expect(await commands.promoteDelayed(stream, member!)).toEqual({ moved: false, dropped: 'repeat' });
    expect((await redis.client().xrange(stream, '-', '+')).map(([id]) => id)).toEqual([plain]);
    // A worker's own promotion of the same case: counted a repeat, not a move.
    await lastValueFrom(client.emit('orders', delayed('L')));
    await lastValueFrom(client.emit('orders', once({ v: 'plain' }, 'L')));
    await redis.client().zadd(schedule, 0, (await redis.client().zrange(schedule, '0', '-1'))[0]!);
    const [promoted] = await new DelayedCommands(redis.client(), redis.cluster).promote([stream], 10);
    expect([promoted!.moved, promoted!.repeats]).toEqual([0, 1]);
    expect(await redis.client().xlen(stream)).toBe(2);
  });

  it('Redis 8.6: at most maxKeys keys per stream and producer id; the oldest is forgotten first', async (ctx) => {
    if (!serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, idempotency: { maxKeys: 2 } });
    const a = await lastValueFrom(client.emit('orders', once({}, 'a')));
    await lastValueFrom(client.emit('orders', once({}, 'b')));
    expect(await lastValueFrom(client.emit('orders', once({}, 'b')))).not.toBe(a);
    await lastValueFrom(client.emit('orders', once({}, 'c')));
    expect(await lastValueFrom(client.emit('orders', once({}, 'a')))).not.toBe(a);
    expect(await redis.client().xlen(`${prefix}orders`)).toBe(4);
  });

  it('Redis 8.6: a producer with other window options is told that Redis forgot the keys it held', async (ctx) => {
    if (!serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const a = await producer({ connection: redis.connection, keyPrefix: prefix, idempotency: { windowSec: 100 } });
    const first = await lastValueFrom(a.client.emit('orders', once({}, 'k')));
    const logs = captureLogs();
    const b = await producer({ connection: redis.connection, keyPrefix: prefix, idempotency: { windowSec: 200 } }, logs.logger);
    expect(await lastValueFrom(b.client.emit('orders', once({}, 'k')))).not.toBe(first);
    expect(logs.from('RedisStreamsClient')).toEqual([
      `warn stream "${prefix}orders" had an idempotency window of 100 s / 10000 keys (another producer's options, or the server's defaults); set to 200 s / 10000 keys, Redis forgot the 1 keys it held: a repeat of those is written again. Give every producer of a stream the same idempotency options.`,
    ]);
  });

  it('Redis 8.6: the window is set again after a reconnect (to a server restarted without data)', async (ctx) => {
    if (!serverHasIdmp || !redis.owned) return ctx.skip();
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, idempotency: { windowSec: 77 } });
    await lastValueFrom(client.emit('orders', once({}, 'k')));
    await redis.restart();
    // The first emits may meet the connection still down: retried until one is taken.
    await waitFor(() => lastValueFrom(client.emit('orders', once({}, 'k2'))).catch(() => false), { message: 'an emit after the restart' });
    expect(await streamInfo(`${prefix}orders`)).toMatchObject({ 'idmp-duration': 77 });
  });

  it('Redis 8.6: inspect and the dashboard show the stream counters and window, and the server line with its features', async (ctx) => {
    if (!serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, idempotency: { windowSec: 90, maxKeys: 40 } });
    for (const k of ['a', 'b', 'a', 'a']) await lastValueFrom(client.emit('orders', once({}, k)));
    const counters = { windowSec: 90, maxKeys: 40, pidsTracked: 1, iidsTracked: 2, iidsAdded: 2, iidsDuplicates: 2 };

    const [report] = JSON.parse((await runCli(redis, ['inspect', key, '--json'])).stdout) as StreamReport[];
    expect(report!.idempotency).toEqual(counters);
    const text = (await runCli(redis, ['inspect', key])).stdout.split('\n');
    expect(text[1]).toMatch(/^server: Redis 8\.\d+\.\d+: .*idempotent-produce/);
    expect(text).toContain('  idempotent writes: 2 added, 2 duplicates  window 90 s, 40 keys per producer  tracked 2 keys of 1 producer');

    const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*` });
    try {
      const overview = (await (await fetch(`${url}api/overview`)).json()) as { server: string; streams: { idempotency: unknown }[] };
      expect(overview.server).toMatch(/^Redis 8\.\d+\.\d+: .*idempotent-produce/);
      expect(overview.streams[0]!.idempotency).toEqual(counters);
      const stream = (await (await fetch(`${url}api/stream?key=${encodeURIComponent(key)}`)).json()) as { idempotency: unknown };
      expect(stream.idempotency).toEqual(counters);
    } finally {
      await new Promise((resolve) => (server.close(resolve), server.closeAllConnections()));
    }
  });

  it('the script: the first id is kept under <stream>:idmp:<producerId>:<key> for windowSec, in the stream slot', async () => {
    const prefix = uniquePrefix();
    const { client } = await producer({
      connection: redis.connection,
      keyPrefix: prefix,
      idempotency: { windowSec: 300 },
      ...(serverHasIdmp ? { newerCommands: false } : {}),
    });
    const first = await lastValueFrom(client.emit('orders', once({}, 'order-42')));
    const stored = recordKey(`${prefix}orders`, 'order-42');
    expect(await redis.client().get(stored)).toBe(first);
    const ttl = await redis.client().ttl(stored);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(300);
  });

  it('a server without XADD … IDMP takes the script by itself', async (ctx) => {
    if (serverHasIdmp) return ctx.skip();
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const first = await lastValueFrom(client.emit('orders', once({}, 'k')));
    expect(await lastValueFrom(client.emit('orders', once({}, 'k')))).toBe(first);
    expect(await redis.client().get(recordKey(`${prefix}orders`, 'k'))).toBe(first);
  });

  it('the rights security.md lists: the minimal producer ACL with +get +set takes the script and says why once; with the IDMP rights, XADD … IDMP', async (ctx) => {
    if (redis.cluster) return ctx.skip(); // ACL users live on one node
    const prefix = uniquePrefix();
    const admin = redis.client();
    const names = [`idmp-a-${prefix.slice(2, 10)}`, `idmp-b-${prefix.slice(2, 10)}`];
    try {
      const logs = captureLogs();
      const scripted = await aclUser(admin, redis.port, names[0]!, prefix, [...PRODUCER_ACL, '+get', '+set']);
      const a = await producer({ connection: scripted, keyPrefix: prefix }, logs.logger);
      const first = await lastValueFrom(a.client.emit('orders', once({}, 'k')));
      expect(await lastValueFrom(a.client.emit('orders', once({}, 'k')))).toBe(first);
      expect(await admin.get(recordKey(`${prefix}orders`, 'k'))).toBe(first);
      expect(logs.from('RedisStreamsClient').filter((l) => l.includes('idempotent writes take the keyed-expiry script'))).toEqual([
        expect.stringMatching(/COMMAND refused: NOPERM.*Grant \+command\|info \+command\|docs/),
      ]);
      if (!serverHasIdmp) return;
      const rights = ['+command|info', '+command|docs', '+xcfgset', '+xinfo|stream', '+exists'];
      const native = await aclUser(admin, redis.port, names[1]!, prefix, [...PRODUCER_ACL, ...rights]);
      const b = await producer({ connection: native, keyPrefix: prefix });
      const id = await lastValueFrom(b.client.emit('other', once({}, 'k')));
      expect(await lastValueFrom(b.client.emit('other', once({}, 'k')))).toBe(id);
      expect(await streamInfo(`${prefix}other`)).toMatchObject({ 'iids-added': 1, 'iids-duplicates': 1 });
    } finally {
      for (const name of names) await admin.call('ACL', 'DELUSER', name);
    }
  });

  it('refuses a bad idempotencyKey where the record is made, and bad options where the client is, naming them', () => {
    expect(() => once({}, '')).toThrow('idempotencyKey must be a non-empty string, got an empty string');
    expect(() => new RedisStreamsRecord({}, {}, { idempotencyKey: 42 as never })).toThrow(
      'idempotencyKey must be a non-empty string, got number',
    );
    for (const [options, option] of [
      [{ idempotency: { windowSec: 0 } }, 'idempotency.windowSec'],
      [{ idempotency: { windowSec: 86_401 } }, 'idempotency.windowSec'],
      [{ idempotency: { maxKeys: 10_001 } }, 'idempotency.maxKeys'],
      [{ idempotency: { window: 5 } }, 'idempotency.window'],
      [{ producerId: 'a:b' }, 'producerId'],
      [{ producerId: '' }, 'producerId'],
    ] as const)
      expect(() => new RedisStreamsClient(options as never)).toThrow(`invalid option "${option}"`);
  });
});
