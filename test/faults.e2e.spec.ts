import type { Redis } from 'ioredis';
import { connect, createServer, type Socket } from 'node:net';
import { RedisStreamsStatus } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { waitParked } from './support/parked.js';
import { aclUser as aclUserOn, CONSUMER_ACL, PRODUCER_ACL } from './support/acl.js';
import { useProducers } from './support/producer.js';
import { useRedis } from './support/use-redis.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { timed, waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';
import { createGroup } from './support/backlog.js';

const redis = useRedis();

const start = useApps();
const producer = useProducers();

const aclUser = (admin: Redis, name: string, prefix: string, rules: readonly string[]) => aclUserOn(admin, redis.port, name, prefix, rules);

describe('faults the loop must survive', () => {
  it('resumes after its blocking connection is killed, without running the entry in hand twice', async () => {
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 200 });
    let release!: () => void;
    app.recorder.behavior = (call) =>
      (call.payload as { slow?: string }).slow ? new Promise<void>((resolve) => (release = resolve)) : undefined;
    const r = redis.client();
    const inHand = await r.xadd(app.key(), '*', 'slow', '1');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the slow handler' });
    const [, blocking] = app.server.unwrap<[Redis, Redis]>();
    await r.client('KILL', 'ID', String(await blocking.client('ID')));
    release();
    const after = await r.xadd(app.key(), '*', 'n', '2');
    await waitFor(() => app.settled.some((e) => e.id === after), { message: 'the next entry after the kill' });
    expect(app.recorder.idsOf().filter((id) => id === inHand)).toHaveLength(1);
    expect(app.settled.filter((e) => e.id === inHand).map((e) => e.outcome)).toEqual(['acked']);
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it('waits out CLIENT PAUSE without a busy loop, an error or a restart, and resumes', async (ctx) => {
    if (!redis.owned) ctx.skip(); // pauses the whole server
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100 });
    const errors: unknown[] = [];
    app.server.on('error', (err: unknown) => errors.push(err));
    const r = redis.client();
    await r.xadd(app.key(), '*', 'n', 'before');
    await waitFor(() => app.settled.length === 1, { message: 'the first entry' });
    // From here on: a park delivered that entry, so both connections are up. Before it, the status
    // may still read connecting (the blocking connection's handshake can end after the groups exist).
    const statuses: string[] = [];
    app.server.status.subscribe((s) => statuses.push(s));
    const stats = async () => Number(/cmdstat_xautoclaim:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
    const before = await stats();
    await r.client('PAUSE', 1500, 'ALL');
    // The producer's XADD waits for the pause too; the consumer must take it once the pause ends.
    const id = await r.xadd(app.key(), '*', 'n', 'during');
    await waitFor(() => app.settled.some((e) => e.id === id), { message: 'the entry written during the pause' });
    expect(app.settled.map((e) => e.outcome)).toEqual(['acked', 'acked']);
    expect(app.recorder.calls.map((c) => [c.payload, c.deliveryCount])).toEqual([
      [{ n: 'before' }, 1],
      [{ n: 'during' }, 1],
    ]);
    // Rode it out: no failed call, no pipeline restart, never reported as disconnected.
    expect(errors).toEqual([]);
    expect(statuses.filter((s) => s !== RedisStreamsStatus.CONNECTED)).toEqual([]);
    // At ~1 beat per blockMs (100 ms) a paused second and a half costs a handful of reclaims, not thousands.
    expect((await stats()) - before).toBeLessThan(60);
  });

  it('gives up on a handler that never returns after handlerTimeoutMs, goes on, and still shuts down within shutdownTimeoutMs', async () => {
    const app = await start({
      connection: redis.url,
      group: 'g',
      keyPrefix: uniquePrefix(),
      blockMs: 50,
      minIdleMs: 60_000,
      handlerTimeoutMs: 200,
      shutdownTimeoutMs: 300,
    });
    app.recorder.behavior = (call) => ((call.payload as { hang?: string }).hang ? new Promise(() => {}) : undefined);
    const r = redis.client();
    const hung = await r.xadd(app.key(), '*', 'hang', '1');
    const next = await r.xadd(app.key(), '*', 'n', '2');
    await waitFor(() => app.settled.length === 2, { message: 'both entries settled' });
    expect(app.settled.map((e) => [e.id, e.outcome])).toEqual([
      [hung, 'failed'],
      [next, 'acked'],
    ]);
    expect(String(app.settled[0]!.error)).toMatch(/handler timed out after 200 ms/);

    // Another one that hangs, in hand while we close.
    const inHand = await r.xadd(app.key(), '*', 'hang', '2');
    await waitFor(() => app.recorder.idsOf().includes(inHand!), { message: 'the second hanging handler' });
    const { ms } = await timed(() => app.close());
    // The handler never returns: a close that waits for it never ends. Bounded by the handler's and the
    // shutdown's timeouts (200 and 300 ms) plus closing; 10 s is room for a busy machine, not a new limit.
    expect(ms).toBeLessThan(10_000);
    // Abandoned, not lost: still pending.
    expect(((await r.xpending(app.key(), 'g', '-', '+', 10)) as [string][]).map(([id]) => id)).toEqual([hung, inHand]);
  });

  it('an ack Redis refused is retried while the worker is idle: its entries are not held forever waiting for a next batch', async (ctx) => {
    if (redis.cluster) return ctx.skip(); // ACL users live on one node
    const admin = redis.client();
    const user = `acker-${uniquePrefix().slice(2, 10)}`;
    await admin.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all');
    const prefix = uniquePrefix();
    const app = await start({
      connection: `redis://${user}:pw@127.0.0.1:${redis.port}`,
      group: 'g',
      keyPrefix: prefix,
      blockMs: 200,
      minIdleMs: 60_000,
      retryMaxDelayMs: 100,
    });
    let calls = 0;
    app.recorder.behavior = async () => {
      // The ack of this first handling is refused; then nothing else arrives.
      if (++calls === 1) await admin.call('ACL', 'SETUSER', user, '-xack');
    };
    await admin.xadd(app.key(), '*', 'n', '1');
    await waitFor(() => calls === 1, { message: 'handled once' });
    // Redis' ACL LOG records the refused XACK.
    await waitFor(async () => JSON.stringify(await admin.call('ACL', 'LOG')).includes(user), { message: 'the XACK refused' });
    await admin.call('ACL', 'SETUSER', user, '+xack');
    // No new entry: the refused ack must still be noticed and the entry settled (run again, at-least-once).
    await waitFor(() => app.settled.length === 1, { message: 'the entry settled without another batch' });
    expect(await pendingCount(redis, app.key())).toBe(0);
    await admin.call('ACL', 'DELUSER', user);
  });

  it('fails listen() with a clear error on a wrong password instead of retrying forever', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const name = `locked-${prefix.slice(2, 10)}`;
    const connection = await aclUser(admin, name, prefix, CONSUMER_ACL);
    try {
      await expect(start({ connection: { ...connection, password: 'wrong' }, keyPrefix: prefix })).rejects.toThrow(/^WRONGPASS/);
    } finally {
      await admin.call('ACL', 'DELUSER', name);
    }
  });

  it('fails listen() with an error naming the stream when the ACL user lacks a right', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const name = `noxgroup-${prefix.slice(2, 10)}`;
    const connection = await aclUser(
      admin,
      name,
      prefix,
      CONSUMER_ACL.filter((rule) => rule !== '+xgroup|create'),
    );
    try {
      await expect(start({ connection, group: 'g', keyPrefix: prefix })).rejects.toThrow(
        new RegExp(`^NOPERM .*\\(XGROUP CREATE "g" on stream "${prefix}orders"\\)`),
      );
    } finally {
      await admin.call('ACL', 'DELUSER', name);
    }
  });

  it('runs consumer and producer under the documented minimal ACL users (events, requests, dead letters, shutdown)', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const tag = prefix.slice(2, 10);
    const consumerConn = await aclUser(admin, `consumer-${tag}`, prefix, CONSUMER_ACL);
    const producerConn = await aclUser(admin, `producer-${tag}`, prefix, PRODUCER_ACL);
    try {
      const app = await start(
        { connection: consumerConn, group: 'g', keyPrefix: prefix, blockMs: 30_000 },
        { controllers: [RequestsController] },
      );
      app.recorder.behavior = (call) => (call.pattern === 'quote' ? 'quoted' : undefined);
      const { client, close } = await producer({ connection: producerConn, keyPrefix: prefix, retention: { maxLen: 1000, safe: true } });
      const id = await lastValueFrom(client.emit('orders', { n: 1 }));
      await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'acked'), { message: 'the event under ACL users' });
      expect(await lastValueFrom(client.send('quote', {}))).toBe('quoted');
      // Dead letters: the consumer may XADD to <stream>:dead.
      const poison = await admin.xadd(`${prefix}orders`, '*', 'data', '{not json');
      await waitFor(() => app.settled.some((e) => e.id === poison && e.outcome === 'dead-lettered'), {
        message: 'the poison entry dead-lettered under the ACL user',
      });
      // … but not to a work stream, nor expire one.
      const asConsumer = redis.newClient(); // AUTH makes the connection the consumer's
      await asConsumer.call('AUTH', consumerConn.username, consumerConn.password);
      await expect(asConsumer.xadd(`${prefix}orders`, '*', 'n', 'x')).rejects.toThrow(/^NOPERM/);
      await expect(asConsumer.pexpire(`${prefix}orders`, 1000)).rejects.toThrow(/^NOPERM/);
      // Parked on BLOCK 30000: closing needs CLIENT UNBLOCK, which the ACL grants. Refused, close() would
      // still end (the lane dropped after a second): Redis' ACL LOG, not the clock, says which way it went.
      await app.close();
      const refused = ((await admin.call('ACL', 'LOG')) as unknown[][]).map((row) => aclLogEntry(row));
      expect(refused.filter((e) => e.username === `consumer-${tag}`).map((e) => e.object)).not.toContain('client|unblock');
      // Closing the client deletes its reply stream: DEL is in the producer's ACL.
      await close();
      expect(await admin.exists(client.replyStream)).toBe(0);
    } finally {
      await admin.call('ACL', 'DELUSER', `consumer-${tag}`, `producer-${tag}`);
    }
  });

  it('still closes when its connections can never come back (its ACL user was deleted mid-command)', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const name = `gone-${prefix.slice(2, 10)}`;
    const connection = await aclUser(admin, name, prefix, CONSUMER_ACL);
    const app = await start({ connection, group: 'g', keyPrefix: prefix, blockMs: 100, commandTimeoutMs: 500, retryMaxDelayMs: 500 });
    const errors: string[] = [];
    app.server.on('error', (err: unknown) => errors.push(String(err)));
    // Kills both connections while the first reclaim is on its way; every reconnect then fails
    // authentication, so ioredis holds that XAUTOCLAIM for a reconnect that never comes.
    await admin.call('ACL', 'DELUSER', name);
    await waitFor(() => errors.length > 0, { message: 'the held command to time out' });
    expect(errors[0]).toMatch(/timed out/i);
    let closed = false;
    void app.close().then(() => (closed = true));
    await waitFor(() => closed, { message: 'close() to return' });
  });

  it('keeps parking when its blocking connection goes silent right after a reconnect (CLIENT ID never answered)', async () => {
    const proxy = await silencingProxy(redis.port);
    try {
      const app = await start({
        connection: { host: '127.0.0.1', port: proxy.port },
        group: 'g',
        consumer: 'k1',
        keyPrefix: uniquePrefix(),
        blockMs: 300,
        minIdleMs: 600_000,
        retryMaxDelayMs: 200,
        // A close that waited on a command to time out would take a minute, not the default 10 s.
        commandTimeoutMs: 60_000,
      });
      const r = redis.client();
      const first = await r.xadd(app.key(), '*', 'n', 'first');
      await waitFor(() => app.settled.some((e) => e.id === first), { message: 'the first entry' });
      proxy.silenceNextClientId();
      const row = String(await r.call('CLIENT', 'LIST', 'TYPE', 'normal'))
        .split('\n')
        .find((l) => l.includes('k1:blocking'))!;
      await r.client('KILL', 'ADDR', /addr=(\S+)/.exec(row)![1]!);
      await waitFor(() => proxy.silenced() === 1, { message: 'the CLIENT ID after the reconnect swallowed' });
      const second = await r.xadd(app.key(), '*', 'n', 'second');
      await waitFor(() => app.settled.some((e) => e.id === second), { message: 'the second entry, once the silent lane is dropped' });
      const { ms } = await timed(() => app.close());
      // A silent connection's QUIT is given a second; waiting on it (or on a command's timeout) is a
      // minute or forever. 10 s is ten times what a busy machine needs, a sixth of the defect.
      expect(ms).toBeLessThan(10_000);
    } finally {
      await proxy.close();
    }
  });

  it('closes within shutdownTimeoutMs and a few seconds even while Redis is paused (CLIENT PAUSE ALL), default commandTimeoutMs', async (ctx) => {
    if (!redis.owned) ctx.skip(); // pauses the whole server; last in this file
    const prefix = uniquePrefix();
    const r = redis.client();
    const key = `${prefix}orders`;
    await createGroup(r, key);
    for (let i = 0; i < 4; i++) await r.xadd(key, '*', 'n', String(i));
    const idle = await start({ connection: redis.url, group: 'g2', keyPrefix: prefix, blockMs: 30_000 });
    const hung = await start({ connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 100, batchSize: 4, shutdownTimeoutMs: 1000 });
    hung.recorder.behavior = () => new Promise(() => {});
    await waitFor(() => hung.recorder.calls.length === 1, { message: 'a hung handler, three entries waiting behind it' });
    await waitParked(r, 'g2:', 'the idle consumer parked');
    await r.client('PAUSE', 12_000, 'ALL');
    let closed = 0;
    for (const app of [idle, hung]) void app.close().then(() => closed++);
    // Twelve seconds of pause, commandTimeoutMs 10 s: only the transport's own short deadlines end close() before.
    // The deadline sits just under commandTimeoutMs, which a close waiting on a command cannot beat.
    await waitFor(() => closed === 2, { message: 'both close() during the pause', timeoutMs: 9_000 });
  });
});

/** One ACL LOG row (a flat list of field, value) as an object. */
function aclLogEntry(row: unknown[]): Record<string, unknown> {
  const entry: Record<string, unknown> = {};
  for (let i = 0; i + 1 < row.length; i += 2) entry[String(row[i])] = row[i + 1];
  return entry;
}

/**
 * A loopback proxy to Redis that, once told, swallows a blocking lane's next CLIENT ID and
 * everything after it on that connection: a connection gone silent right after connecting.
 */
async function silencingProxy(port: number) {
  let armed = false;
  let silenced = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    let blockingLane = false;
    let dead = false;
    client.on('data', (d: Buffer) => {
      const text = d.toString('latin1');
      if (text.includes(':blocking')) blockingLane = true;
      if (armed && blockingLane && /CLIENT\r\n\$2\r\nID\r\n/i.test(text)) {
        dead = true;
        armed = false;
        silenced++;
      }
      if (!dead) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => void (dead || client.write(d)));
    for (const s of [client, upstream]) s.on('error', () => s.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    silenceNextClientId: () => void (armed = true),
    silenced: () => silenced,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
