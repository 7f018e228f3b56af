import type { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { useProducers } from './support/producer.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

const start = useApps();
const producer = useProducers();

/** Everything an outsider can observe of a key: length, stream metadata, groups, TTL. */
async function snapshot(r: Redis, key: string) {
  return {
    xlen: await r.xlen(key),
    stream: await r.xinfo('STREAM', key),
    groups: await r.xinfo('GROUPS', key),
    ttl: await r.ttl(key),
    first: await r.xrange(key, '-', '+', 'COUNT', 3),
  };
}

describe('replies go only to reply streams (replyTo is untrusted input)', () => {
  it.each([
    { as: 'a user with every right' },
    { as: 'the README\'s minimal consumer ACL user', acl: true },
  ])('refuses a request whose replyTo names a work stream ($as): the stream stays byte-for-byte intact and the request is dead-lettered', async ({ acl }) => {
    const prefix = uniquePrefix();
    const r = redis.client();
    const user = `rn-${prefix.slice(2, 10)}`;
    const connection = acl ? await aclUser(r, redis.port, user, prefix, CONSUMER_ACL) : redis.url;
    onTestFinished(async () => void (acl && (await r.call('ACL', 'DELUSER', user))));
    const victim = `${prefix}orders-archive`;
    await r.xgroup('CREATE', victim, 'other-team', '0', 'MKSTREAM');
    const pipeline = r.pipeline();
    for (let i = 0; i < 3000; i++) pipeline.xadd(victim, '*', 'n', String(i));
    await pipeline.exec();
    const before = await snapshot(r, victim);
    expect(before.xlen).toBe(3000);

    const logs = captureLogs();
    const app = await start({ connection, group: 'g', keyPrefix: prefix, blockMs: 100 }, { controllers: [RequestsController], logger: logs.logger });
    app.recorder.behavior = () => 'answer';
    const hostile = [
      victim,
      `${prefix}orders`, // the app's own work stream
      'replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11', // the namespace without this app's keyPrefix
      `${prefix}replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11:x`, // a suffix after the client's id
      `${prefix}replies:*`,
    ];
    const ids: string[] = [];
    for (const replyTo of hostile) ids.push((await r.xadd(`${prefix}quote`, '*', 'data', '{}', 'correlationId', 'x', 'replyTo', replyTo))!);

    const requests = () => app.settled.filter((e) => e.stream === `${prefix}quote`);
    await waitFor(() => requests().length === hostile.length, { message: 'every hostile request settled' });
    expect(await snapshot(r, victim)).toEqual(before);
    expect(requests().map((e) => e.outcome)).toEqual(hostile.map(() => 'dead-lettered'));
    // Refused before dispatch: the handler never ran for a request that can never be answered.
    expect(app.recorder.calls).toEqual([]);
    expect(await r.exists(`${prefix}orders`)).toBe(1);
    expect(await r.ttl(`${prefix}orders`)).toBe(-1);
    for (const key of hostile.slice(2)) expect(await r.exists(key)).toBe(0);

    const dead = (await r.xrange(`${prefix}quote:dead`, '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));
    expect(dead.map((d) => d.sourceId)).toEqual(ids);
    for (const [i, d] of dead.entries()) expect(d.error).toContain(`replyTo ${JSON.stringify(hostile[i])} is not a reply stream`);
    // Logged with the stream and the entry id.
    for (const id of ids) expect(logs.text()).toMatch(new RegExp(`entry ${id} of stream "${prefix}quote".*replyTo`));
  });

  it('still answers requests from RedisStreamsClient, whose reply streams are inside the namespace', async () => {
    const prefix = uniquePrefix();
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 100 }, { controllers: [RequestsController] });
    app.recorder.behavior = () => 'answer';
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix });
    expect(client.replyStream.startsWith(`${prefix}replies:`)).toBe(true);
    expect(await lastValueFrom(client.send('quote', {}))).toBe('answer');
  });
});

describe('a reply Redis refuses to write', () => {
  it('is a Redis failure, not the handler\'s: the loop retries the request, never reports the handler as failed, and gives up after maxDeliveries', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const user = `noreply-${prefix.slice(2, 10)}`;
    // Every key of the app, but reply streams read-only: XADD to one fails with NOPERM.
    await admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>pw', `~${prefix}quote*`, `~${prefix}orders*`, `~${prefix}payments*`, `%R~${prefix}replies:*`, '+@all');
    try {
      const app = await start(
        { connection: { host: '127.0.0.1', port: redis.port, username: user, password: 'pw' }, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000, maxDeliveries: 2, retryInitialDelayMs: 50, retryMaxDelayMs: 100 },
        { controllers: [RequestsController] },
      );
      const errors: unknown[] = [];
      app.server.on('error', (err: unknown) => errors.push(err));
      app.recorder.behavior = () => 'answer';
      const { client } = await producer({ connection: redis.url, keyPrefix: prefix });
      const answer = lastValueFrom(client.send('quote', {}));
      answer.catch(() => undefined);

      await waitFor(() => app.settled.some((e) => e.outcome === 'dead-lettered'), { message: 'the unanswerable request to be dead-lettered' });
      expect(errors.length).toBeGreaterThanOrEqual(2);
      expect(errors.map((e) => String((e as Error).message)).filter((m) => !/^NOPERM/.test(m))).toEqual([]);
      // Never counted as a handler failure: the only outcome is the final dead letter.
      expect(app.settled.map((e) => e.outcome)).toEqual(['dead-lettered']);
      // Re-run after each failed reply (at-least-once, like a failed ack), with Redis' delivery counts.
      expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 2]);
      const [dead] = (await admin.xrange(`${prefix}quote:dead`, '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));
      expect(dead!.error).toMatch(/delivered 3 times \(maxDeliveries 2\) without being settled/);
      expect(dead!.error).not.toMatch(/handler failed/);
      expect(((await admin.xpending(`${prefix}quote`, 'g')) as [number])[0]).toBe(0);
    } finally {
      await admin.call('ACL', 'DELUSER', user);
    }
  });

  it('dead-letters at once a request whose reply stream can never take a reply (its ids exhausted), without stalling the loop', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    const replyTo = `${prefix}replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11`;
    await r.xadd(replyTo, '18446744073709551615-18446744073709551615', 'x', 'y');
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 50, maxDeliveries: 5 }, { controllers: [RequestsController] });
    app.recorder.behavior = () => 'answer';
    const request = await r.xadd(`${prefix}quote`, '*', 'data', '{}', 'correlationId', 'c1', 'replyTo', replyTo);
    const innocent = await r.xadd(`${prefix}orders`, '*', 'n', '1');
    await waitFor(() => app.settled.some((e) => e.stream === `${prefix}orders` && e.id === innocent && e.outcome === 'acked'), { message: 'the innocent entry on another stream' });
    const requests = () => app.settled.filter((e) => e.stream === `${prefix}quote`);
    await waitFor(() => requests().length > 0, { message: 'the request settled' });
    expect(requests().map((e) => [e.id, e.outcome])).toEqual([[request, 'dead-lettered']]);
    expect(app.recorder.idsOf('quote')).toEqual([request]);
    const [dead] = (await r.xrange(`${prefix}quote:dead`, '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));
    expect(dead!.error).toMatch(/reply to .* refused: ERR The stream has exhausted the last possible ID.*can never be answered/);
  });
});
