import { DeadLetterException } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { CLUSTER_MODE, deadLetterKey, startRedis, type TestRedis } from './support/redis-server.js';
import { consumerOptions } from './support/consumer-options.js';
import { startApp, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup } from './support/backlog.js';

// Issue 35, item 5: a Redis at its maxmemory with noeviction (the production setting) refuses the
// commands that may grow memory (`denyoom`: XADD, XGROUP CREATE, ZADD, a script that writes) and
// serves the rest (XREADGROUP, XACK, XAUTOCLAIM). What each side does then, in
// docs/failure-semantics.md's table: nothing is lost, and the work that frees memory goes on.

let redis: TestRedis;
// CONFIG SET maxmemory concerns the whole server: one of this file's own.
beforeAll(async () => (redis = await startRedis({ standalone: true })));
afterAll(async () => redis?.stop());

const start = useApps();
const producer = useProducers();

/** Every write that may grow memory refused from now on (used memory is above 1 byte), until `roomAgain`. */
const full = () => redis.client().config('SET', 'maxmemory', '1');
const roomAgain = () => redis.client().config('SET', 'maxmemory', '0');

describe.skipIf(CLUSTER_MODE)('Redis out of memory (maxmemory, noeviction)', () => {
  afterEach(roomAgain);

  it('a producer fails at once naming the stream and OOM, writing nothing; consumers go on with what is there, acking it', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50 }));
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    await lastValueFrom(client.emit('orders', { n: 1 }));
    await waitFor(() => app.settled.length === 1, { message: 'the first entry' });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    app.recorder.behavior = () => held;
    for (let n = 2; n <= 4; n++) await redis.client().xadd(app.key(), '*', 'n', String(n));
    await waitFor(() => app.recorder.calls.length === 2, { message: 'the second entry in hand' });
    await full();
    const error = await lastValueFrom(client.emit('orders', { n: 5 })).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toMatch(
      new RegExp(`XADD to stream "${app.key()}" failed: OOM command not allowed when used memory > 'maxmemory'`),
    );
    expect(await redis.client().xlen(app.key())).toBe(4);
    // Reads and acks free memory: the consumer settles what it has and what waits in the stream.
    release();
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 4, { message: 'the three entries acked while full' });
    expect(((await redis.client().xpending(app.key(), 'g')) as [number])[0]).toBe(0);
  });

  it('a dead-letter move refused stays pending (nothing lost), and is made once there is room', async () => {
    const prefix = uniquePrefix();
    // The groups and the entry before Redis is full; the worker after, so that its first move is refused.
    for (const pattern of ['orders', 'payments']) await createGroup(redis.client(), `${prefix}${pattern}`);
    const id = (await redis.client().xadd(`${prefix}orders`, '*', 'n', 'poison'))!;
    await full();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, minIdleMs: 300 }));
    app.recorder.behavior = () => {
      throw new DeadLetterException('poison');
    };
    await waitFor(() => app.recorder.calls.length >= 1, { message: 'the handler called' });
    await waitFor(async () => ((await redis.client().xpending(app.key(), 'g')) as [number])[0] === 1, {
      message: 'the entry pending, its move refused',
    });
    expect(await redis.client().xlen(deadLetterKey(app.key()))).toBe(0);
    await roomAgain();
    await waitFor(() => app.settled.some((e) => e.outcome === 'dead-lettered' && e.id === id), {
      message: 'the move made once there is room',
      timeoutMs: 20_000,
    });
    expect(await redis.client().xlen(deadLetterKey(app.key()))).toBe(1);
  });

  it('a worker (re)started while Redis is full starts on a group that exists, and consumes; one whose group must be created fails at once, naming OOM', async () => {
    const prefix = uniquePrefix();
    const first = await start(consumerOptions(redis, { consumer: 'a', keyPrefix: prefix, blockMs: 50 }));
    await first.close();
    await redis.client().xadd(first.key(), '*', 'n', '1');
    await full();
    // XGROUP CREATE is refused even for a group that exists (Redis checks memory before the command).
    const again = await start(consumerOptions(redis, { consumer: 'a', keyPrefix: prefix, blockMs: 50, startupTimeoutMs: 600_000 }));
    await waitFor(() => again.settled.length === 1, { message: 'the entry handled by the restarted worker' });
    const failure = await startApp({
      connection: redis.connection,
      group: 'new-group',
      keyPrefix: prefix,
      blockMs: 50,
      startupTimeoutMs: 600_000,
    }).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (err: unknown) => err as Error,
    );
    expect(failure?.message).toMatch(/^OOM command not allowed when used memory > 'maxmemory'.*\(XGROUP CREATE "new-group" on stream/);
  });
});
