import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { aclUser } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { freezeServer } from './support/freeze.js';
import { deadLetterKey } from './support/redis-server.js';
import { pendingCount } from './support/pending.js';
import { useRedis } from './support/use-redis.js';
import { batchFailure, uniquePrefix, useApps, type AppExtras, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/**
 * Entries written in one MULTI (one read) whose handler is held; `poison` of them fails on its only delivery
 * (maxDeliveries 1) once Redis is frozen (SIGSTOP), so its dead-letter move times out (commandTimeoutMs 300, well
 * below the park's watchdog: blockMs + 2 s). Thawed once the worker says it waits for the move's fate.
 */
async function moveWhileFrozen(
  extras: AppExtras,
  rows: string[][],
  hold: (app: TestApp, release: Promise<void>) => void,
  { connection = redis.url as string | Awaited<ReturnType<typeof aclUser>>, minIdleMs = undefined as number | undefined } = {},
) {
  const prefix = uniquePrefix();
  const admin = redis.client();
  const logs = captureLogs();
  const errors: unknown[] = [];
  const app = await start(
    {
      connection,
      group: 'g',
      consumer: 'c',
      keyPrefix: prefix,
      blockMs: 100,
      maxDeliveries: 1,
      commandTimeoutMs: 300,
      ...(minIdleMs === undefined ? {} : { minIdleMs }),
    },
    { ...extras, logger: logs.logger, on: [['error', (err: unknown) => errors.push(err)]] },
  );
  let release!: () => void;
  hold(app, new Promise<void>((resolve) => (release = resolve)));
  const multi = admin.multi();
  for (const fields of rows) multi.xadd(app.key(), '*', ...fields);
  const ids = ((await multi.exec()) ?? []).map(([, id]) => id as string);
  await waitFor(() => app.recorder.calls.length + app.batches.calls.length > 0, { message: 'the read in hand' });
  const thaw = await freezeServer(admin);
  try {
    release();
    // (Before the fix the loop failed on the timeout instead: an error event.)
    await waitFor(() => /got no answer .*waiting for Redis to tell whether it ran/.test(logs.text()) || errors.length > 0, {
      timeoutMs: 15_000,
      message: 'the move given up on, its fate waited for',
    });
  } finally {
    thaw();
  }
  return { app, admin, logs, ids, errors };
}

/** The letters of `app`'s stream: one per source id. */
async function letters(app: TestApp) {
  const rows = await redis.client().xrange(deadLetterKey(app.key()), '-', '+');
  return rows.map(([id, fields]) => decodeDeadLetter(id, fields));
}

describe('a dead-letter move Redis does not answer in time (SIGSTOP)', () => {
  it("is settled by what Redis says once it answers: dead-lettered; the read's other entries run once and are acked", async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip(); // freezes the whole server
    const { app, logs, ids, errors } = await moveWhileFrozen(
      {},
      [
        ['n', '0'],
        ['n', '1'],
        ['n', '2'],
        ['n', '3'],
      ],
      (app, release) => {
        app.recorder.behavior = async (call) => {
          await release;
          if (call.id === ids[0]) throw new Error('poison');
        };
      },
    );
    await waitFor(() => ids.every((id) => app.settled.some((e) => e.id === id)), { message: 'every entry settled' });
    const [letter, ...more] = await letters(app);
    expect(more).toEqual([]);
    // Its letter's id, lost with the move's answer, found among the dead-letter stream's newest.
    expect(app.settled.find((e) => e.id === ids[0])).toMatchObject({ outcome: 'dead-lettered', deadLetterId: letter!.id });
    expect(logs.text()).toMatch(new RegExp(`entry ${ids[0]} of stream ".*" \\(delivery 1\\): .*moved to ".*" as ${letter!.id}`));
    // Before: the loop restarted on the timeout, its self-drain counted the other three a second delivery, and
    // maxDeliveries 1 dead-lettered them unrun.
    expect(app.settled.filter((e) => e.id !== ids[0]).map((e) => e.outcome)).toEqual(['acked', 'acked', 'acked']);
    expect(app.recorder.calls.map((c) => c.id)).toEqual(ids);
    expect([letter!.sourceId, letter!.deliveryCount]).toEqual([ids[0], 1]);
    expect(await pendingCount(redis, app.key())).toBe(0);
    expect(errors).toEqual([]);
  });

  it("a batch handler's call: the entry it failed is dead-lettered once, the others acked", async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const rows = [0, 1, 2, 3, 4, 5].map((n) => ['data', JSON.stringify({ n })]);
    const { app, ids } = await moveWhileFrozen(
      { defaults: false, handlers: [{ pattern: 'orders', extras: { batch: { maxSize: 10, maxWaitMs: 50 } } }] },
      rows,
      (app, release) => {
        app.batches.behavior = async (entries) => {
          await release;
          const bad = entries.filter((e) => (e.payload as { n?: number }).n === 3);
          if (bad.length > 0) throw batchFailure(bad.map((entry) => ({ entry, error: new Error('poison') })));
        };
      },
    );
    await waitFor(() => ids.every((id) => app.settled.some((e) => e.id === id)), { message: 'every entry settled' });
    expect(app.settled.filter((e) => e.outcome !== 'acked').map((e) => [e.id, e.outcome])).toEqual([[ids[3], 'dead-lettered']]);
    expect(app.batches.calls.flatMap((c) => c.ids)).toEqual(ids);
    expect((await letters(app)).map((l) => l.sourceId)).toEqual([ids[3]]);
    expect(await pendingCount(redis, app.key())).toBe(0);
  });

  it('an ordered key goes on after it (not held for a retry that never comes)', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const { app, admin, ids } = await moveWhileFrozen(
      { defaults: false, handlers: [{ pattern: 'orders', extras: { ordered: true } }] },
      [['data', '{}', 'partitionKey', 'k1']],
      (app, release) => {
        app.recorder.behavior = async () => {
          await release;
          throw new Error('poison');
        };
      },
    );
    await waitFor(() => app.settled.some((e) => e.id === ids[0]), { message: 'the poison entry settled' });
    app.recorder.behavior = () => undefined;
    const next = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
    await waitFor(() => app.settled.some((e) => e.id === next && e.outcome === 'acked'), { message: 'the next entry of k1 acked' });
    expect(app.recorder.calls.map((c) => c.id)).toEqual([ids[0], next]);
    expect((await letters(app)).map((l) => l.sourceId)).toEqual([ids[0]]);
  });

  for (const ordered of [false, true])
    it(`its move ran but its letter cannot be looked for (no +xrevrange): not taken back for a second letter${ordered ? ', its ordered key goes on' : ''}`, async (ctx) => {
      if (!redis.owned || redis.cluster) ctx.skip();
      const name = `no-look-${uniquePrefix().slice(2, 10)}`;
      const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~*', '&*', '+@all', '-xrevrange']);
      const { app, admin, logs, ids } = await moveWhileFrozen(
        ordered ? { defaults: false, handlers: [{ pattern: 'orders', extras: { ordered: true } }] } : {},
        [['data', '{}', 'partitionKey', 'k1']],
        (app, release) => {
          app.recorder.behavior = async () => {
            await release;
            throw new Error('poison');
          };
        },
        // The owed-entry audit every 500 ms (leaseRenewMs: a third of it); a take-back from nobody's pending list within 3 s.
        { connection: user, minIdleMs: 3000 },
      );
      await waitFor(() => app.settled.some((e) => e.id === ids[0]), { message: 'the poison entry settled' });
      const settledAt = performance.now();
      expect(app.settled.find((e) => e.id === ids[0])?.outcome).toBe('failed');
      expect(logs.text()).toMatch(/no longer pending, but its letter was not found \(the look refused: .*NOPERM/);
      app.recorder.behavior = () => undefined;
      const next = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
      // Before: settled as failed, it was owed (an ordered key waited for its retry): the owed-entry audit took it back from
      // nobody's pending list (its move had acked it) and rejoined the group, which counted it (and the next entry of k1,
      // ordered) a second delivery: maxDeliveries 1 dead-lettered them unrun (a second letter for it).
      await waitFor(() => app.settled.some((e) => e.id === next && e.outcome === 'acked'), { message: 'the next entry of k1 acked' });
      // Until a take-back can no longer be (last seen pending here minIdleMs ago): nothing more of it.
      await waitFor(() => performance.now() - settledAt >= 3000, { message: 'the take-back window closed', intervalMs: 100 });
      expect(logs.text()).not.toMatch(/taken back/);
      expect(app.recorder.calls.map((c) => c.id)).toEqual([ids[0], next]);
      expect((await letters(app)).map((l) => l.sourceId)).toEqual([ids[0]]);
      expect(app.settled.filter((e) => e.id === ids[0])).toHaveLength(1);
      expect(await pendingCount(redis, app.key())).toBe(0);
    });

  it('an operator acks the entry while its move waits (CLIENT PAUSE): failed, its letter not found (a forged one beside it), no letter written (review-o, review-p)', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const prefix = uniquePrefix();
    const admin = redis.newClient();
    const operator = redis.newClient();
    const logs = captureLogs();
    const app = await start(
      { connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100, maxDeliveries: 1, commandTimeoutMs: 300 },
      { logger: logs.logger },
    );
    let fail!: () => void;
    app.recorder.behavior = () => new Promise<void>((_, reject) => (fail = () => reject(new Error('poison'))));
    const id = (await admin.xadd(app.key(), '*', 'n', '1'))!;
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the entry in hand' });
    // A forged letter naming the entry (review-p): not this move's letter (no deadAt, no error of its own).
    const forged = (await operator.xadd(
      deadLetterKey(app.key()),
      '*',
      'stream',
      app.key(),
      'sourceId',
      id,
      'group',
      'g',
      'consumer',
      'c',
    ))!;
    // Paused clients are served in the order they came: the operator's XACK (written at once), then the move. The pause
    // ends by itself (a paused server takes no CLIENT UNPAUSE either), well after the move's 300 ms.
    await admin.call('CLIENT', 'PAUSE', 5000, 'ALL');
    const acked = operator.xack(app.key(), 'g', id);
    fail();
    await waitFor(() => /got no answer .*waiting for Redis to tell whether it ran/.test(logs.text()), { message: 'the move waited for' });
    expect(await acked).toBe(1);
    await waitFor(() => app.settled.some((e) => e.id === id), { message: 'the entry settled' });
    expect(app.settled.find((e) => e.id === id)?.outcome).toBe('failed');
    expect(logs.text()).toMatch(/no longer pending, but its letter was not found \(not among the newest 100\)/);
    expect((await letters(app)).map((l) => l.id)).toEqual([forged]);
    expect(app.recorder.calls.map((c) => c.id)).toEqual([id]);
  });

  it('an error text that does not survive UTF-8 (a lone surrogate): its letter is still found (review-q)', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const { app, ids } = await moveWhileFrozen({}, [['n', '0']], (app, release) => {
      app.recorder.behavior = async () => {
        await release;
        throw new Error('poison \ud83d');
      };
    });
    await waitFor(() => app.settled.some((e) => e.id === ids[0]), { message: 'the entry settled' });
    const [letter, ...more] = await letters(app);
    expect(more).toEqual([]);
    expect(app.settled.find((e) => e.id === ids[0])).toMatchObject({ outcome: 'dead-lettered', deadLetterId: letter!.id });
  });
});
