import type { Redis } from 'ioredis';
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

/** The worker's options here: its move times out after 300 ms (well below the park's watchdog: blockMs + 2 s). */
const WORKER = { group: 'g', consumer: 'c', blockMs: 100, maxDeliveries: 1, commandTimeoutMs: 300 };

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
    { connection, keyPrefix: prefix, ...WORKER, ...(minIdleMs === undefined ? {} : { minIdleMs }) },
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
    // Only the move's own line thaws it: another command's timeout (an ordered reader's, on a loaded machine) may come
    // first, and a thaw then let the move be answered in time (CI, Valkey 9 lane: 'dead-lettered', not 'failed').
    await waitFor(() => /got no answer .*waiting for Redis to tell whether it ran/.test(logs.text()), {
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
      expect(logs.text()).toMatch(/no longer pending, but its letter was not found \(the look refused: .*(NOPERM|no permissions)/);
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

  /** Paused clients are served in the order they came: the operator's command (written at once), then the move. */
  async function commandBeforeMove(ordered: boolean, command: (operator: Redis, key: string, id: string) => Promise<unknown>) {
    const prefix = uniquePrefix();
    const admin = redis.newClient();
    const operator = redis.newClient();
    const logs = captureLogs();
    const app = await start(
      // minIdleMs well above the pause: the entry, last seen pending here just before it, may be taken back.
      { connection: redis.url, keyPrefix: prefix, ...WORKER, minIdleMs: 8000 },
      { logger: logs.logger, ...(ordered ? { defaults: false, handlers: [{ pattern: 'orders', extras: { ordered: true } }] } : {}) },
    );
    let fail!: () => void;
    app.recorder.behavior = () => new Promise<void>((_, reject) => (fail = () => reject(new Error('poison'))));
    const id = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
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
    // The pause ends by itself (a paused server takes no CLIENT UNPAUSE either), after the move's 300 ms.
    await admin.call('CLIENT', 'PAUSE', 1500, 'ALL');
    const done = command(operator, app.key(), id);
    fail();
    await waitFor(() => /got no answer .*waiting for Redis to tell whether it ran/.test(logs.text()), { message: 'the move waited for' });
    await done;
    await waitFor(() => app.settled.some((e) => e.id === id), { message: 'the entry settled' });
    expect(app.settled.find((e) => e.id === id)?.outcome).toBe('failed');
    // Its letter is nowhere in the dead-letter stream: the move found it not this consumer's, and wrote nothing.
    expect(logs.text()).toMatch(
      new RegExp(`entry ${id} of stream ".*" \\(delivery 1\\): not dead-lettered, this consumer no longer owns it`),
    );
    const own = async () => (await letters(app)).filter((l) => l.id !== forged);
    // No letter of the move's (delivery 1); one taken back later is delivery 2.
    expect((await own()).filter((l) => l.deliveryCount === 1)).toEqual([]);
    return { app, admin, id, own };
  }

  // Each takes the entry from this consumer's pending list: the owed-entry audit or a restart's rejoin takes it back.
  const operatorCommands: [string, (operator: Redis, key: string, id: string) => Promise<unknown>][] = [
    ['acks it (XACK)', (operator, key, id) => operator.xack(key, 'g', id)],
    ['deletes the consumer (XGROUP DELCONSUMER)', (operator, key) => operator.call('XGROUP', 'DELCONSUMER', key, 'g', 'c')],
    [
      're-creates the group (XGROUP DESTROY, CREATE $)',
      (operator, key) => Promise.all([operator.call('XGROUP', 'DESTROY', key, 'g'), operator.call('XGROUP', 'CREATE', key, 'g', '$')]),
    ],
  ];
  for (const ordered of [false, true])
    for (const [what, command] of operatorCommands)
      it(`an operator ${what} while its move waits (CLIENT PAUSE): the move wrote nothing (a forged letter beside it), and the entry is taken back and dead-lettered once${ordered ? ', its ordered key going on after' : ''} (review-o, review-p, review-r)`, async (ctx) => {
        if (!redis.owned || redis.cluster) ctx.skip();
        const { app, admin, id, own } = await commandBeforeMove(ordered, command);
        // Before (review-r): settled "in doubt", never tried again: neither run nor dead-lettered, and not pending.
        await waitFor(async () => (await own()).length > 0, { message: 'taken back and dead-lettered', timeoutMs: 20_000 });
        app.recorder.behavior = () => undefined;
        const next = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
        await waitFor(() => app.settled.some((e) => e.id === next && e.outcome === 'acked'), { message: 'the next entry acked' });
        // Taken back a second delivery, past maxDeliveries 1: dead-lettered unrun, once.
        expect((await own()).map((l) => [l.sourceId, l.deliveryCount])).toEqual([[id, 2]]);
        expect(app.recorder.calls.map((c) => c.id)).toEqual([id, next]);
        expect(await pendingCount(redis, app.key())).toBe(0);
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
