import { RpcException } from '@nestjs/microservices';
import type { DeadLetter } from 'nestjs-redis-streams';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { CORE_HOST, deadLetter, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';
import { groupOnNewStream } from './support/backlog.js';

const redis = useRedis();

const start = useApps();

const deadLetters = async (key: string): Promise<DeadLetter[]> =>
  (await redis.client().xrange(deadLetterKey(key), '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));

describe('poison entries and the dead-letter stream', () => {
  it('dead-letters an entry whose handler fails on its last allowed delivery, with its origin, fields and last error', async () => {
    const app = await start(consumerOptions(redis, { consumer: 'c', blockMs: 50, minIdleMs: 200, maxDeliveries: 3 }));
    app.recorder.behavior = (call) => {
      // The letter names the class and the message of what the handler threw (handler-errors.e2e covers the other kinds).
      throw CORE_HOST ? new TypeError(`boom ${call.deliveryCount}`) : new RpcException(`boom ${call.deliveryCount}`);
    };
    const id = (await redis.client().xadd(app.key(), '*', 'order_id', '13', 'status', 'cursed'))!;
    await waitFor(() => app.settled.some((e) => e.outcome === 'dead-lettered'), { message: 'the entry to be dead-lettered' });

    expect(app.recorder.calls.map((c) => c.deliveryCount)).toEqual([1, 2, 3]);
    expect(app.settled.map((e) => e.outcome)).toEqual(['failed', 'failed', 'dead-lettered']);
    const [dead, ...more] = await deadLetters(app.key());
    expect(more).toEqual([]);
    expect(dead).toMatchObject({
      id: app.settled[2]!.deadLetterId,
      stream: app.key(),
      sourceId: id,
      group: 'g',
      consumer: 'c',
      deliveryCount: 3,
      fields: ['order_id', '13', 'status', 'cursed'],
    });
    expect(dead!.error).toMatch(new RegExp(`handler failed on delivery 3 of 3: ${CORE_HOST ? 'TypeError' : 'RpcException'}: boom 3`));
    // The handler's stack: its error, then its frames, the throw in this file among them.
    expect(dead!.stack).toMatch(CORE_HOST ? /^TypeError: boom 3\n\s+at / : /^RpcException: boom 3\n\s+at /);
    expect(dead!.stack).toContain('dead-letter.e2e.spec.ts');
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it("keeps a handler's stack bounded, its control characters escaped, and none for a letter no handler failed", async () => {
    const app = await start(consumerOptions(redis, { consumer: 'c', blockMs: 50, maxDeliveries: 1 }));
    // A message of 20,000 characters with an escape sequence and a bell, thrown from 300 frames deep.
    const deep = (n: number): never => {
      if (n === 0) throw new Error(`\u001b[31mred\u0007 ${'x'.repeat(20_000)}`);
      return deep(n - 1);
    };
    const limit = Error.stackTraceLimit;
    app.recorder.behavior = () => {
      Error.stackTraceLimit = 400;
      try {
        deep(300);
      } finally {
        Error.stackTraceLimit = limit;
      }
    };
    await redis.client().xadd(app.key(), '*', 'data', '{}');
    // Not JSON at all: dead-lettered by the decoder, no handler ran.
    await redis.client().xadd(app.key(), '*', 'data', '{');
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 2, {
      message: 'both entries to be dead-lettered',
    });
    const [failed, undecodable] = await deadLetters(app.key());
    // Its message cut (whole in `error`), its frames kept up to the bound, then said cut.
    expect(failed!.stack!.length).toBeLessThanOrEqual(4_000 + '\n    … (cut at 4000 characters)'.length);
    expect(failed!.stack).toMatch(/^Error: \\x1b\[31mred\\x07 x+…\n/);
    expect(failed!.stack!.split('\n')[0]).toHaveLength(501);
    expect(failed!.stack!.split('\n').filter((line) => line.includes('at deep')).length).toBeGreaterThan(20);
    expect(failed!.stack).toMatch(/\n {4}… \(cut at 4000 characters\)$/);
    expect(failed!.stack).toContain('\\x1b[31mred\\x07');
    // eslint-disable-next-line no-control-regex -- the point: none is left raw
    expect(failed!.stack).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f]/);
    expect(undecodable!.error).toMatch(/not|JSON|decode/i);
    expect(undecodable!.stack).toBeUndefined();
  });

  it('dead-letters an entry delivered past maxDeliveries without running its handler (its consumers kept dying)', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r);
    const id = (await r.xadd(key, '*', 'n', '1'))!;
    // Three deliveries already, each to a consumer that died; now pending under C, whose self-drain makes it the 4th.
    await r.xreadgroup('GROUP', 'g', 'd1', 'STREAMS', key, '>');
    await r.xclaim(key, 'g', 'C', 0, id, 'RETRYCOUNT', 3);
    const app = await start(consumerOptions(redis, { consumer: 'C', keyPrefix: prefix, blockMs: 50, maxDeliveries: 3 }));
    await waitFor(() => app.settled.length === 1, { message: 'the entry to be settled' });
    expect(app.settled[0]).toMatchObject({ outcome: 'dead-lettered', source: 'drain' });
    expect(app.recorder.calls).toEqual([]);
    expect((await deadLetters(key))[0]!.error).toBe('delivered 4 times (maxDeliveries 3) without being settled');
  });

  it('dead-letters undecodable, empty-headed and oversized entries at once, without reaching a handler or stopping the loop', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50, maxEntryBytes: 1024 }));
    const r = redis.client();
    const badJson = await r.xadd(app.key(), '*', 'data', '{not json');
    const badHeaders = await r.xadd(app.key(), '*', 'data', '{}', 'headers', '[1,2]');
    const huge = await r.xadd(app.key(), '*', 'data', JSON.stringify({ blob: 'x'.repeat(4096) }));
    const good = await r.xadd(app.key(), '*', 'data', '{"ok":true}');
    await waitFor(() => app.settled.length === 4, { message: 'four settled entries' });
    expect(app.settled.map((e) => [e.id, e.outcome])).toEqual([
      [badJson, 'dead-lettered'],
      [badHeaders, 'dead-lettered'],
      [huge, 'dead-lettered'],
      [good, 'acked'],
    ]);
    expect(app.recorder.idsOf()).toEqual([good]);
    const reasons = (await deadLetters(app.key())).map((d) => d.error);
    expect(reasons[0]).toMatch(/field "data" cannot be deserialized/);
    expect(reasons[1]).toMatch(/field "headers" must be a JSON object of strings/);
    expect(reasons[2]).toMatch(/entry is \d+ bytes, above maxEntryBytes \(1024\)/);
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it('dead-letters at once when the handler throws DeadLetterException', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50 }));
    app.recorder.behavior = () => {
      throw deadLetter('unknown customer');
    };
    await redis.client().xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.settled.length === 1, { message: 'the entry to be settled' });
    expect(app.settled[0]).toMatchObject({ outcome: 'dead-lettered', deliveryCount: 1 });
    expect((await deadLetters(app.key()))[0]!.error).toBe('handler refused it: unknown customer');
  });

  it('keeps poison entries pending when dead-lettering is disabled, and goes on with the rest', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50, deadLetterStream: false }));
    const r = redis.client();
    const bad = await r.xadd(app.key(), '*', 'data', 'nope');
    const good = await r.xadd(app.key(), '*', 'data', '1');
    await waitFor(() => app.settled.length === 2, { message: 'both settled' });
    expect(app.settled.map((e) => [e.id, e.outcome])).toEqual([
      [bad, 'failed'],
      [good, 'acked'],
    ]);
    expect(await r.exists(deadLetterKey(app.key()))).toBe(0);
    expect(await pendingCount(redis, app.key())).toBe(1);
  });

  it('does not dead-letter an entry this consumer no longer owns', async () => {
    const app = await start(consumerOptions(redis, { consumer: 'slow', blockMs: 50, minIdleMs: 60_000 }));
    const r = redis.client();
    let fail!: () => void;
    app.recorder.behavior = () => new Promise<void>((_, reject) => (fail = () => reject(deadLetter('late'))));
    const id = (await r.xadd(app.key(), '*', 'n', '1'))!;
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the handler to start' });
    // A peer takes the entry over (as after a lapsed lease) before the handler gives up.
    await r.xclaim(app.key(), 'g', 'peer', 0, id);
    fail();
    await waitFor(() => app.settled.length === 1, { message: 'the entry to be settled' });
    expect(app.settled[0]!.outcome).toBe('failed');
    expect(await r.exists(deadLetterKey(app.key()))).toBe(0);
    const pending = (await r.xpending(app.key(), 'g', '-', '+', 10)) as [string, string][];
    expect(pending.map(([pendingId, owner]) => [pendingId, owner])).toEqual([[id, 'peer']]);
  });

  it('leaves an entry pending and goes on when its dead-letter stream refuses it (its ids exhausted by a hostile write)', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    await r.xadd(deadLetterKey(`${prefix}orders`), '18446744073709551615-18446744073709551615', 'x', 'y');
    const app = await start(
      consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, minIdleMs: 60_000, retryInitialDelayMs: 50, retryMaxDelayMs: 200 }),
    );
    const poison = await r.xadd(`${prefix}orders`, '*', 'data', '{not json');
    const innocent = await r.xadd(`${prefix}payments`, '*', 'data', '{"ok":true}');
    await waitFor(() => app.settled.some((e) => e.stream === `${prefix}payments` && e.id === innocent && e.outcome === 'acked'), {
      message: 'the innocent entry on another stream',
    });
    await waitFor(() => app.settled.some((e) => e.stream === `${prefix}orders`), { message: 'the poison entry settled' });
    const [event] = app.settled.filter((e) => e.stream === `${prefix}orders`);
    expect(event).toMatchObject({ outcome: 'failed' });
    expect(String((event!.error as Error).message)).toMatch(/could not be dead-lettered.*exhausted/);
    // Not lost: still pending, back through reclaim after minIdleMs.
    expect(((await r.xpending(`${prefix}orders`, 'g', '-', '+', 10)) as [string][]).map(([id]) => id)).toEqual([poison]);
  });

  it('counts maxEntryBytes in bytes as Redis holds them: a binary value by its bytes, multibyte characters by theirs', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, maxEntryBytes: 20 }));
    const r = redis.client();
    // 3 + 10 bytes; decoded as UTF-8 it would be 27 (each invalid byte a three-byte U+FFFD).
    const binary = await r.xadd(`${prefix}orders`, '*', 'bin', Buffer.from('82a26964cdfffea176c3', 'hex'));
    // 11 characters, 21 bytes.
    const wide = await r.xadd(`${prefix}orders`, '*', 'm', 'é'.repeat(10));
    await waitFor(() => app.settled.length === 2, { message: 'both entries settled' });
    expect(app.settled.find((e) => e.id === binary)).toMatchObject({ outcome: 'acked' });
    expect(app.settled.find((e) => e.id === wide)).toMatchObject({ outcome: 'dead-lettered' });
    expect((await deadLetters(`${prefix}orders`))[0]!.error).toMatch(/^entry is 21 bytes, above maxEntryBytes \(20\)/);
  });

  // CONFIG SET reaches one node of a cluster: the one-node run covers it.
  it.skipIf(CLUSTER_MODE)(
    'dead-letters an entry with its copy even above proto-max-bulk-len: the copy is made inside Redis',
    async (ctx) => {
      if (!redis.owned) ctx.skip(); // changes the server's configuration
      const prefix = uniquePrefix();
      const r = redis.client();
      const [, limit] = (await r.config('GET', 'proto-max-bulk-len')) as [string, string];
      await r.config('SET', 'proto-max-bulk-len', String(1024 * 1024));
      onTestFinished(async () => void (await redis.client().config('SET', 'proto-max-bulk-len', limit)));
      const app = await start(
        consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, minIdleMs: 60_000, retryInitialDelayMs: 50, retryMaxDelayMs: 200 }),
      );
      // Not JSON, so it is dead-lettered; its JSON-escaped copy (6 bytes per \u0001) is over 1 MB, which no client could send.
      const poison = await r.xadd(`${prefix}orders`, '*', 'data', '\u0001'.repeat(200_000));
      const innocent = await r.xadd(`${prefix}payments`, '*', 'data', '{"ok":true}');
      await waitFor(() => app.settled.some((e) => e.stream === `${prefix}payments` && e.id === innocent && e.outcome === 'acked'), {
        message: 'the innocent entry on another stream',
      });
      await waitFor(() => app.settled.some((e) => e.stream === `${prefix}orders` && e.id === poison && e.outcome === 'dead-lettered'), {
        message: 'the poison entry dead-lettered',
      });
      const [dead] = await deadLetters(`${prefix}orders`);
      expect(dead).toMatchObject({ sourceId: poison, fields: ['data', '\u0001'.repeat(200_000)] });
      expect(dead!.error).toMatch(/cannot be deserialized/);
      expect(dead!.error).not.toMatch(/not copied/);
      expect(await pendingCount(redis, `${prefix}orders`)).toBe(0);
    },
  );

  it('deadLetterRetention trims the dead-letter stream as each letter is added: to maxLen letters, or to letters younger than maxAgeMs (Redis clock)', async () => {
    const prefix = uniquePrefix();
    const byCount = await start(
      consumerOptions(redis, { keyPrefix: `${prefix}count:`, blockMs: 50, maxDeliveries: 1, deadLetterRetention: { maxLen: 3 } }),
    );
    byCount.recorder.behavior = () => {
      throw deadLetter('poison');
    };
    const admin = redis.client();
    for (let n = 0; n < 8; n++) await admin.xadd(byCount.key(), '*', 'n', String(n));
    await waitFor(() => byCount.settled.length === 8, { message: 'eight letters' });
    // The newest three: exactly maxLen.
    expect((await deadLetters(byCount.key())).map((l) => l.fields)).toEqual([5, 6, 7].map((n) => ['n', String(n)]));

    const byAge = await start(
      consumerOptions(redis, { keyPrefix: `${prefix}age:`, blockMs: 50, maxDeliveries: 1, deadLetterRetention: { maxAgeMs: 3_600_000 } }),
    );
    byAge.recorder.behavior = byCount.recorder.behavior;
    // A letter from 1970, and one from ten minutes ago (ids are Redis' time in ms): only the first is past an hour.
    const [seconds] = (await admin.time()) as unknown as [string, string];
    const tenMinutesAgo = `${Number(seconds) * 1000 - 600_000}-0`;
    await admin.xadd(deadLetterKey(byAge.key()), '1000-0', 'stream', byAge.key(), 'sourceId', '1-1', 'fields', '[]', 'error', 'old');
    await admin.xadd(
      deadLetterKey(byAge.key()),
      tenMinutesAgo,
      'stream',
      byAge.key(),
      'sourceId',
      '1-2',
      'fields',
      '[]',
      'error',
      'recent',
    );
    await admin.xadd(byAge.key(), '*', 'n', 'now');
    await waitFor(() => byAge.settled.length === 1, { message: 'the letter' });
    expect((await admin.xrange(deadLetterKey(byAge.key()), '-', '+')).map(([id]) => id).slice(0, 1)).toEqual([tenMinutesAgo]);
    expect(await admin.xlen(deadLetterKey(byAge.key()))).toBe(2);
  });
});
