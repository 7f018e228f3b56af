import { Controller } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import type { Redis } from 'ioredis';
import { REDIS_STREAMS_TRANSPORT, RedisStreamsContext } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { aclUser, CONSUMER_ACL } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { useProducers } from './support/producer.js';
import { useRedis } from './support/use-redis.js';
import { Recorder, RequestsController, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup } from './support/backlog.js';

const redis = useRedis();

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
  it.each([{ as: 'a user with every right' }, { as: "the README's minimal consumer ACL user", acl: true }])(
    'refuses a request whose replyTo names a work stream ($as): the stream stays byte-for-byte intact and the request is dead-lettered',
    async ({ acl }) => {
      const prefix = uniquePrefix();
      const r = redis.client();
      const user = `rn-${prefix.slice(2, 10)}`;
      const connection = acl ? await aclUser(r, redis.port, user, prefix, CONSUMER_ACL) : redis.url;
      onTestFinished(async () => void (acl && (await r.call('ACL', 'DELUSER', user))));
      const victim = `${prefix}orders-archive`;
      await createGroup(r, victim, 'other-team');
      const pipeline = r.pipeline();
      for (let i = 0; i < 3000; i++) pipeline.xadd(victim, '*', 'n', String(i));
      await pipeline.exec();
      const before = await snapshot(r, victim);
      expect(before.xlen).toBe(3000);

      const logs = captureLogs();
      const app = await start(
        { connection, group: 'g', keyPrefix: prefix, blockMs: 100 },
        { controllers: [RequestsController], logger: logs.logger },
      );
      app.recorder.behavior = () => 'answer';
      const hostile = [
        victim,
        `${prefix}orders`, // the app's own work stream
        'replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11', // the namespace without this app's keyPrefix
        `${prefix}replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11:x`, // a suffix after the client's id
        `${prefix}replies:*`,
      ];
      const ids: string[] = [];
      for (const replyTo of hostile)
        ids.push((await r.xadd(`${prefix}quote`, '*', 'data', '{}', 'correlationId', 'x', 'replyTo', replyTo))!);

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
    },
  );

  it('still answers requests from RedisStreamsClient, whose reply streams are inside the namespace', async () => {
    const prefix = uniquePrefix();
    const app = await start({ connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 100 }, { controllers: [RequestsController] });
    app.recorder.behavior = () => 'answer';
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix });
    expect(client.replyStream.startsWith(`${prefix}replies:`)).toBe(true);
    expect(await lastValueFrom(client.send('quote', {}))).toBe('answer');
  });
});

/** A request pattern read before an event pattern: in one park, the request comes first in the batch. */
@Controller()
class AskThenNoteController {
  constructor(private readonly recorder: Recorder) {}

  @MessagePattern('ask', REDIS_STREAMS_TRANSPORT)
  ask(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }

  @EventPattern<string>('note')
  note(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }
}

describe('a reply Redis refuses to write', () => {
  it('concerns only its request: the batch-mates run once and are acked, the reader never restarts, and the request comes back by reclaim until dead-lettered for its reply', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    const user = `noreply-${prefix.slice(2, 10)}`;
    // Every key of the app, but reply streams read-only: XADD to one fails with NOPERM, every time.
    await admin.call(
      'ACL',
      'SETUSER',
      user,
      'reset',
      'on',
      '>pw',
      `~${prefix}ask*`,
      `~${prefix}note*`,
      `~${prefix}orders*`,
      `~${prefix}payments*`,
      `%R~${prefix}replies:*`,
      '+@all',
    );
    onTestFinished(async () => void (await admin.call('ACL', 'DELUSER', user)));
    // Written before the consumer starts (the group starts at 0): its first park returns all ten in one batch, the request first.
    const replyTo = `${prefix}replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11`;
    const request = (await admin.xadd(`${prefix}ask`, '*', 'data', '{}', 'correlationId', 'c1', 'replyTo', replyTo))!;
    const notes: string[] = [];
    for (let i = 0; i < 9; i++) notes.push((await admin.xadd(`${prefix}note`, '*', 'data', JSON.stringify(i)))!);

    const logs = captureLogs();
    const app = await start(
      {
        connection: { host: '127.0.0.1', port: redis.port, username: user, password: 'pw' },
        group: 'g',
        keyPrefix: prefix,
        blockMs: 100,
        batchSize: 10,
        minIdleMs: 300,
        maxDeliveries: 3,
      },
      { controllers: [AskThenNoteController], logger: logs.logger },
    );
    const errors: unknown[] = [];
    app.server.on('error', (err: unknown) => errors.push(err));
    app.recorder.behavior = () => 'answer';

    const noteCalls = () => app.recorder.calls.filter((c) => c.pattern === 'note');
    await waitFor(() => noteCalls().length >= 9, { message: 'the nine batch-mates handled' });
    const notePending = async () => ((await admin.xpending(`${prefix}note`, 'g')) as [number])[0];
    await waitFor(async () => (await notePending()) === 0, { message: 'the nine batch-mates acked' });
    // The reader keeps taking new entries while the request is still unanswered.
    const later = (await admin.xadd(`${prefix}note`, '*', 'data', '"later"'))!;
    await waitFor(() => app.settled.some((e) => e.id === later && e.outcome === 'acked'), { message: 'an entry added afterwards' });

    const requests = () => app.settled.filter((e) => e.stream === `${prefix}ask`);
    await waitFor(() => requests().some((e) => e.outcome === 'dead-lettered'), { message: 'the unanswerable request to be dead-lettered' });
    // Each batch-mate ran exactly once, on its first delivery.
    expect(noteCalls().map((c) => [c.id, c.deliveryCount])).toEqual([...notes, later].map((id) => [id, 1]));
    expect(app.settled.filter((e) => e.stream === `${prefix}note`).map((e) => e.outcome)).toEqual(Array(10).fill('acked'));
    // Left pending, back through reclaim once per real re-delivery, dead-lettered on the last one for its reply.
    expect(app.recorder.idsOf('ask')).toEqual([request, request, request]);
    expect(app.recorder.calls.filter((c) => c.pattern === 'ask').map((c) => c.deliveryCount)).toEqual([1, 2, 3]);
    expect(requests().map((e) => [e.source, e.outcome])).toEqual([
      ['new', 'failed'],
      ['reclaim', 'failed'],
      ['reclaim', 'dead-lettered'],
    ]);
    const [dead] = (await admin.xrange(`${prefix}ask:dead`, '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));
    expect(dead!.sourceId).toBe(request);
    expect(dead!.error).toMatch(
      new RegExp(`reply to "${replyTo}" for entry ${request} of "${prefix}ask" could not be written on delivery 3 of 3: NOPERM`),
    );
    expect(await admin.xlen(`${prefix}note:dead`)).toBe(0);
    expect(((await admin.xpending(`${prefix}ask`, 'g')) as [number])[0]).toBe(0);
    // No Redis-failure path: the loop never restarted (no self-drain re-read inflating counts).
    expect(errors).toEqual([]);
    expect(logs.text()).toMatch(
      new RegExp(
        `reply to "${replyTo}" for entry ${request} of "${prefix}ask" could not be written \\(delivery 1 of 3\\): NOPERM.*; left pending`,
      ),
    );
  });

  it('dead-letters at once a request whose reply stream can never take a reply (its ids exhausted), without stalling the loop', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    const replyTo = `${prefix}replies:0b4e9f3c-59c1-4a57-9c4c-8f1f0f4f3a11`;
    await r.xadd(replyTo, '18446744073709551615-18446744073709551615', 'x', 'y');
    const app = await start(
      { connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 50, maxDeliveries: 5 },
      { controllers: [RequestsController] },
    );
    app.recorder.behavior = () => 'answer';
    const request = await r.xadd(`${prefix}quote`, '*', 'data', '{}', 'correlationId', 'c1', 'replyTo', replyTo);
    const innocent = await r.xadd(`${prefix}orders`, '*', 'n', '1');
    await waitFor(() => app.settled.some((e) => e.stream === `${prefix}orders` && e.id === innocent && e.outcome === 'acked'), {
      message: 'the innocent entry on another stream',
    });
    const requests = () => app.settled.filter((e) => e.stream === `${prefix}quote`);
    await waitFor(() => requests().length > 0, { message: 'the request settled' });
    expect(requests().map((e) => [e.id, e.outcome])).toEqual([[request, 'dead-lettered']]);
    expect(app.recorder.idsOf('quote')).toEqual([request]);
    const [dead] = (await r.xrange(`${prefix}quote:dead`, '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));
    expect(dead!.error).toMatch(/reply to .* refused: ERR The stream has exhausted the last possible ID.*can never be answered/);
  });
});
