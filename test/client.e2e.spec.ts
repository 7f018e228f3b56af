import { RpcException } from '@nestjs/microservices';
import { inspect } from 'node:util';
import { RedisStreamsClient, RedisStreamsRecord, RedisStreamsStatus } from 'nestjs-redis-streams';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { firstValueFrom, lastValueFrom, of, timeout, toArray } from 'rxjs';
import { captureLogs } from './support/logs.js';
import { waitParked } from './support/parked.js';
import { useProducers } from './support/producer.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();
const producer = useProducers();

const consumer = (prefix: string, extra: object = {}) =>
  start({ connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, ...extra }, { controllers: [RequestsController] });

describe('RedisStreamsClient.emit', () => {
  it('delivers payload and headers to the @EventPattern handler; the id it returns is the id the handler sees', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix);
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const id = await lastValueFrom(client.emit('orders', new RedisStreamsRecord({ orderId: 7, items: ['a'] }, { traceId: 't-1' })));
    const plainId = await lastValueFrom(client.emit('orders', { orderId: 8 }));
    await waitFor(() => app.recorder.calls.length === 2, { message: 'two emitted entries' });
    expect(app.recorder.calls.map((c) => [c.id, c.payload, c.headers])).toEqual([
      [id, { orderId: 7, items: ['a'] }, { traceId: 't-1' }],
      [plainId, { orderId: 8 }, {}],
    ]);
    expect(id).toMatch(/^\d+-\d+$/);
  });

  it('says connected once its connections are up, before any request; its first send changes nothing (on a cluster the reply connection opens with it)', async () => {
    const { logger, lines } = captureLogs();
    // Back once the status has left `connecting`: before the fix a cluster producer stayed there until its first send.
    const { client } = await producer({ connection: redis.connection, keyPrefix: uniquePrefix() }, logger);
    const statuses: string[] = [];
    client.status.subscribe((s) => statuses.push(s));
    expect(statuses).toEqual([RedisStreamsStatus.CONNECTED]);
    // The first send opens the reply connection (on a cluster; on one node it is open already): no answer is needed.
    const sending = client.send('orders', {}).subscribe({ error: () => undefined });
    try {
      await waitFor(
        () => {
          try {
            return client.unwrap<[unknown, { status: string }]>()[1].status === 'ready';
          } catch {
            return false;
          }
        },
        { message: 'the reply connection up' },
      );
    } finally {
      sending.unsubscribe();
    }
    expect(statuses).toEqual([RedisStreamsStatus.CONNECTED]);
    expect(lines.filter((l) => /dropped|restored|lost/.test(l))).toEqual([]);
  });

  it('a worker says connected once, and logs no loss it did not have, from its start to its close (review finding)', async () => {
    const { logger, lines } = captureLogs();
    const consumer = `status-${uniquePrefix().slice(2, 10)}`;
    const worker = new StreamConsumer({
      connection: redis.connection,
      group: 'g',
      consumer,
      keyPrefix: uniquePrefix(),
      blockMs: 500,
      logger,
    });
    worker.handle('orders', async () => undefined);
    const statuses: string[] = [];
    worker.status.subscribe((s) => statuses.push(s));
    try {
      await worker.start();
      await waitParked(redis.client(), `${consumer}:blocking`, 'the worker parked');
    } finally {
      await worker.close();
    }
    expect(lines.filter((l) => /dropped|restored|lost/.test(l))).toEqual([]);
    expect(statuses).toEqual(['connecting', 'connected', 'closing', 'closed']);
  });

  it("a wrong password fails an emit at once with the server's refusal (WRONGPASS), on a cluster too, and never prints the password (review finding)", async () => {
    const wrong = `wrong-${uniquePrefix()}`;
    const withPassword = (url: string) => url.replace('redis://', `redis://nobody:${wrong}@`);
    const connection = Array.isArray(redis.connection)
      ? redis.connection.map((u) => withPassword(String(u)))
      : withPassword(String(redis.connection));
    const logs = captureLogs();
    const { client } = await producer({ connection, commandTimeoutMs: 5000 }, logs.logger);
    const err = await lastValueFrom(client.emit('orders', {})).then(
      () => expect.fail('emit should have failed'),
      (e: unknown) => e as Error,
    );
    // Refused, not waited for: before, the emit failed once commandTimeoutMs passed, "not reachable".
    expect(err.message).toContain('WRONGPASS');
    expect(err.message).not.toMatch(/not reachable/);
    for (const output of [inspect(err, { depth: 20 }), logs.text()]) expect(output).not.toContain(wrong);
  });

  it('refuses a payload it cannot serialize (BigInt, cycle) and writes nothing', async () => {
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(lastValueFrom(client.emit('orders', { n: 1n }))).rejects.toThrow(
      /cannot write to stream ".*orders": payload is not JSON-serializable: .*BigInt/,
    );
    await expect(lastValueFrom(client.emit('orders', cyclic))).rejects.toThrow(/not JSON-serializable: .*circular/i);
    expect(await redis.client().exists(`${prefix}orders`)).toBe(0);
  });

  // ACL users live on one node: the one-node run covers NOPERM.
  it.skipIf(CLUSTER_MODE)(
    'fails with a clear message on a key of the wrong type, on NOPERM, and when Redis stays unreachable',
    async () => {
      const prefix = uniquePrefix();
      const admin = redis.client();
      await admin.set(`${prefix}orders`, 'a string');
      const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
      await expect(lastValueFrom(client.emit('orders', {}))).rejects.toThrow(
        new RegExp(`XADD to stream "${prefix}orders" failed: WRONGTYPE`),
      );

      const user = `producer-${prefix.slice(2, 10)}`;
      await admin.call('ACL', 'SETUSER', user, 'on', '>secret', `~${prefix}allowed:*`, '+@all');
      try {
        const limited = await producer({
          connection: {
            ...(new URL(redis.url).port ? { port: Number(new URL(redis.url).port) } : {}),
            host: '127.0.0.1',
            username: user,
            password: 'secret',
          },
          keyPrefix: prefix,
        });
        await expect(lastValueFrom(limited.client.emit('orders', {}))).rejects.toThrow(/XADD to stream ".*orders" failed: NOPERM/);
        await expect(lastValueFrom(limited.client.emit('allowed:orders', {}))).resolves.toMatch(/^\d+-\d+$/);
      } finally {
        await admin.call('ACL', 'DELUSER', user);
      }

      // Nothing listens on port 1: the emit gives up after commandTimeoutMs.
      const offline = new RedisStreamsClient({ connection: { host: '127.0.0.1', port: 1 }, commandTimeoutMs: 300 });
      try {
        await expect(lastValueFrom(offline.emit('orders', {}))).rejects.toThrow(
          /XADD to stream "orders" failed: Redis not reachable within 300 ms/,
        );
      } finally {
        await offline.close();
      }
    },
  );
  it('fails an emit whose XADD was cut off and whose connection never comes back, instead of hanging', async (ctx) => {
    if (!redis.owned) ctx.skip(); // pauses the whole server
    const prefix = uniquePrefix();
    const admin = redis.client();
    const user = `cut-${prefix.slice(2, 10)}`;
    await admin.call('ACL', 'SETUSER', user, 'on', '>secret', `~${prefix}*`, '+@all');
    const { client } = await producer({
      connection: { host: '127.0.0.1', port: redis.port, username: user, password: 'secret' },
      keyPrefix: prefix,
      commandTimeoutMs: 500,
    });
    await lastValueFrom(client.emit('orders', { n: 0 }));
    const blocked = async () => Number(/blocked_clients:(\d+)/.exec(await admin.info('clients'))?.[1]);
    const before = await blocked();
    // The server holds the next XADD; deleting the user then cuts the connection under it, and
    // every reconnect fails authentication: ioredis keeps that XADD for a reconnect that never comes.
    await admin.call('CLIENT', 'PAUSE', 10_000, 'WRITE');
    try {
      const emitted = lastValueFrom(client.emit('orders', { n: 1 }));
      emitted.catch(() => undefined);
      await waitFor(async () => (await blocked()) > before, { message: 'the XADD held by the pause' });
      await admin.call('ACL', 'DELUSER', user);
      await expect(emitted).rejects.toThrow(
        new RegExp(`XADD to stream "${prefix}orders" failed: no answer within 500 ms; the entry may or may not have been written`),
      );
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
  });
});

describe('RedisStreamsClient.send', () => {
  it('returns a value, a Promise and each value of an Observable; an RpcException reaches the caller', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix);
    app.recorder.behavior = (call) => {
      const { kind, n } = call.payload as { kind: string; n: number };
      if (kind === 'value') return n * 2;
      if (kind === 'promise') return Promise.resolve({ doubled: n * 2 });
      if (kind === 'observable') return of(n, n + 1, n + 2);
      throw new RpcException({ code: 'OUT_OF_STOCK', message: `no stock for ${n}` });
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    expect(await lastValueFrom(client.send('quote', { kind: 'value', n: 21 }))).toBe(42);
    expect(await lastValueFrom(client.send('quote', { kind: 'promise', n: 2 }))).toEqual({ doubled: 4 });
    expect(await lastValueFrom(client.send('quote', { kind: 'observable', n: 5 }).pipe(toArray()))).toEqual([5, 6, 7]);
    await expect(lastValueFrom(client.send('quote', { kind: 'fail', n: 3 }))).rejects.toEqual({
      code: 'OUT_OF_STOCK',
      message: 'no stock for 3',
    });
    // Requests are consumer-group entries: all four acked once answered (the events follow the XACK's reply, so both are awaited).
    await waitFor(
      async () =>
        app.settled.filter((e) => e.outcome === 'acked').length >= 4 &&
        ((await redis.client().xpending(`${prefix}quote`, 'g')) as [number])[0] === 0,
      { message: 'requests acked' },
    );
    expect(app.settled.filter((e) => e.outcome === 'acked')).toHaveLength(4);
  });

  it('answers a result the serializer refuses (a BigInt) with an error, once: the handler runs once and the request is acked', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix, { minIdleMs: 300, maxDeliveries: 3 });
    app.recorder.behavior = (call) => {
      const { n } = call.payload as { n: number };
      if (n === 1) return { id: 12345678901234567890n };
      if (n === 2) return of('first', 2n, 'never');
      throw new RpcException({ code: 3n });
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    // Well within the timeout: an error reply, not the caller's own timeout.
    await expect(lastValueFrom(client.send('quote', { n: 1 }).pipe(timeout(5000)))).rejects.toMatchObject({
      message: expect.stringMatching(/result could not be serialized: .*BigInt/),
    });
    // An Observable: the values before the refused one arrive, then the error ends the stream.
    const seen: unknown[] = [];
    await expect(
      new Promise((resolve, reject) =>
        client
          .send('quote', { n: 2 })
          .pipe(timeout(5000))
          .subscribe({ next: (v) => seen.push(v), error: reject, complete: () => resolve(undefined) }),
      ),
    ).rejects.toMatchObject({ message: expect.stringMatching(/result could not be serialized/) });
    expect(seen).toEqual(['first']);
    // An error JSON cannot hold still answers the caller.
    await expect(lastValueFrom(client.send('quote', { n: 3 }).pipe(timeout(5000)))).rejects.toMatchObject({
      message: expect.stringMatching(/error could not be serialized: .*BigInt/),
    });
    // The settled events come with the XACKs' replies, which may arrive after the PEL is seen empty.
    await waitFor(async () => app.settled.length === 3 && ((await redis.client().xpending(`${prefix}quote`, 'g')) as [number])[0] === 0, {
      message: 'the requests acked',
    });
    expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 1, 1]);
    expect(app.settled.map((e) => e.outcome)).toEqual(['acked', 'acked', 'acked']);
    expect(await redis.client().exists(`${prefix}quote:dead`)).toBe(0);
  });

  it('answers a pattern without a message handler with the error other Nest transports give', async () => {
    const prefix = uniquePrefix();
    // 'orders' has an @EventPattern handler, not a @MessagePattern one.
    await consumer(prefix);
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    await expect(lastValueFrom(client.send('orders', { n: 1 }))).rejects.toBe(
      'There is no matching message handler defined in the remote service.',
    );
  });

  it('resolves 1,000 concurrent requests from one client, each with its own answer', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix, { batchSize: 100 });
    app.recorder.behavior = (call) => `answer-${(call.payload as { i: number }).i}`;
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => lastValueFrom(client.send('quote', { i }))));
    expect(answers).toEqual(Array.from({ length: 1000 }, (_, i) => `answer-${i}`));
  });

  it.each([
    { after: 'a restart under the same name', first: 'worker-1', second: 'worker-1', minIdleMs: 600_000, source: 'drain' },
    { after: 'a peer reclaims it', first: 'dies', second: 'peer', minIdleMs: 300, source: 'reclaim' },
  ])('still answers a waiting caller when the consumer died mid-request: after $after', async ({ first, second, minIdleMs, source }) => {
    const prefix = uniquePrefix();
    // Its close runs after the "crash": on a cluster ioredis queues the late ack of a disconnected
    // Cluster instead of failing it, so close() waits out commandTimeoutMs (10 s by default).
    const dying = await consumer(prefix, { consumer: first, minIdleMs, commandTimeoutMs: 1000 });
    let hang!: () => void;
    dying.recorder.behavior = () => new Promise<void>((resolve) => (hang = resolve));
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const answer = lastValueFrom(client.send('quote', { n: 1 }));
    await waitFor(() => dying.recorder.calls.length === 1, { message: 'the first consumer to take the request' });
    // "Crash": its connections drop without a goodbye; the request stays pending under its name.
    for (const conn of dying.server.unwrap<[{ disconnect(): void }, { disconnect(): void }]>()) conn.disconnect();
    const rescuer = await consumer(prefix, { consumer: second, minIdleMs });
    rescuer.recorder.behavior = () => `answered after ${source}`;
    try {
      expect(await answer).toBe(`answered after ${source}`);
      await waitFor(() => rescuer.settled.length === 1, { message: 'the recovered request to be acked' });
      expect(rescuer.settled.map((e) => [e.source, e.outcome])).toEqual([[source, 'acked']]);
    } finally {
      hang();
    }
  });

  it('drops a reply that arrives after the caller gave up, without an error', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix);
    let release!: () => void;
    app.recorder.behavior = (call) =>
      (call.payload as { slow?: boolean }).slow ? new Promise((resolve) => (release = () => resolve('late'))) : 'fast';
    const logs = captureLogs();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix }, logs.logger);
    const clientErrors: unknown[] = [];
    client.on('error', (err) => clientErrors.push(err));
    await expect(firstValueFrom(client.send('quote', { slow: true }).pipe(timeout(200)))).rejects.toThrow(/Timeout/);
    await waitFor(() => typeof release === 'function', { message: 'the slow handler to start' });
    release();
    await waitFor(() => app.settled.length === 1, { message: 'the late reply to be written' });
    expect(app.settled[0]!.outcome).toBe('acked');
    // The client keeps working and routes the next answer correctly; by then the late reply was read.
    expect(await lastValueFrom(client.send('quote', {}))).toBe('fast');
    await waitFor(async () => (await redis.client().xlen(client.replyStream)) === 0, { message: 'both replies read' });
    // Dropped without an error: none emitted, none logged (warn or error) by the client (Nest's logger
    // is global, so the consumer app's own lines land in the capture too: they are not the client's).
    expect(clientErrors).toEqual([]);
    expect(logs.from('RedisStreamsClient').filter((l) => /^(warn|error) /.test(l))).toEqual([]);
  });

  it('keeps its reply stream small and short-lived: read replies are deleted, the stream has a TTL and is deleted on close', async () => {
    const prefix = uniquePrefix();
    const app = await consumer(prefix, { replyTtlMs: 60_000 });
    app.recorder.behavior = () => of(1, 2, 3);
    // A TTL long enough that the stream cannot expire before it is read, however slow the machine (with 1 s it
    // could: xlen 0 of a gone key, then no TTL to read).
    const replyTtlMs = 30_000;
    const { client, close } = await producer({ connection: redis.connection, keyPrefix: prefix, replyBlockMs: 100, replyTtlMs });
    for (let i = 0; i < 20; i++) await lastValueFrom(client.send('quote', {}).pipe(toArray()));
    const admin = redis.client();
    await waitFor(async () => (await admin.xlen(client.replyStream)) === 0, { message: 'read replies to be deleted' });
    expect(await admin.exists(client.replyStream)).toBe(1);
    const ttl = await admin.pttl(client.replyStream);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(replyTtlMs);
    await close();
    expect(await admin.exists(client.replyStream)).toBe(0);
  });

  it('lets the reply stream of a client that died expire', async () => {
    const prefix = uniquePrefix();
    // The orphan reply exists for replyTtlMs: with 400 ms a busy machine's poll could miss it (seen on the
    // cluster, 4 yes loops). Two seconds is five times that window; the wait for its expiry is a condition.
    const replyTtlMs = 2_000;
    const app = await consumer(prefix, { replyTtlMs });
    app.recorder.behavior = () => 'ok';
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix, replyBlockMs: 100, replyTtlMs });
    // A reply nobody reads: the client dies before it arrives.
    let release!: () => void;
    app.recorder.behavior = () => new Promise((resolve) => (release = () => resolve('too late')));
    client.send('quote', {}).subscribe({ error: () => {} });
    await waitFor(() => typeof release === 'function', { message: 'the handler to start' });
    // The reply reader's connection opens with its first read, which a loaded machine may not have sent yet.
    const conns = await waitFor(
      () => {
        try {
          return client.unwrap<[{ disconnect(): void }, { disconnect(): void }]>();
        } catch {
          return undefined;
        }
      },
      { message: 'the reply reader connected' },
    );
    for (const conn of conns) conn.disconnect();
    release();
    const admin = redis.client();
    await waitFor(async () => (await admin.exists(client.replyStream)) === 1, { message: 'the orphan reply to be written' });
    await waitFor(async () => (await admin.exists(client.replyStream)) === 0, {
      message: 'the orphan reply stream to expire',
      timeoutMs: 15_000,
    });
  });
});
