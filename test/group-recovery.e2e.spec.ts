import { DeliveryMarks } from '../libs/redis-streams/src/consumer/custody/delivery-marks.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps, type AppExtras, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup } from './support/backlog.js';
import { pendingCount, quiesced } from './support/pending.js';
import { captureLogs } from './support/logs.js';
import { redisProxy } from './support/redis-proxy.js';
import { gate as newGate } from './support/gate.js';
import { RECOVER_SCRIPT } from '../libs/redis-streams/src/redis/read/recover-script.js';
import { createHash } from 'node:crypto';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { monitorCommands } from './support/monitor.js';

const redis = useRedis();

const start = useApps();

const tagOf = (c: { payload: unknown }) => (c.payload as { tag: string }).tag;
/** Handler calls per tag, over every app. */
function counts(apps: TestApp[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of apps) for (const c of a.recorder.calls) out[tagOf(c)] = (out[tagOf(c)] ?? 0) + 1;
  return out;
}
/** Group `g` on `key` with entries tagged x0…x3, and a gate a handler can wait on. */
async function fourEntriesAndGate(key: string) {
  const r = redis.client();
  await createGroup(r, key);
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await r.xadd(key, '*', 'tag', `x${i}`))!);
  return { ids, ...newGate() };
}

/**
 * Consumer `consumer` on `prefix` (batches of 2, leaseRenewMs 100, minIdleMs a minute), `options` over those,
 * whose handler waits on `gate` at x0 (of fourEntriesAndGate).
 */
async function startHeldAtX0(
  connection: string,
  consumer: string,
  prefix: string,
  gate: Promise<void>,
  extras: AppExtras,
  options: Partial<Parameters<typeof start>[0]> = {},
): Promise<TestApp> {
  const app = await start(
    { connection, group: 'g', consumer, keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000, leaseRenewMs: 100, batchSize: 2, ...options },
    extras,
  );
  app.recorder.behavior = async (c) => {
    if (tagOf(c) === 'x0') await gate;
  };
  return app;
}

/** Waits until x0 is in hand, x1 waits its turn and x2 and x3 are read ahead: all four pending (under `app`). */
const oneInHandThreeFetched = (app: TestApp, key: string) =>
  waitFor(async () => app.recorder.calls.length === 1 && (await pendingCount(redis, key)) === 4, {
    message: 'a batch in hand and one read ahead',
  });

/** Each of x0…x3 handled once by `app`, the read-ahead batch too, and nothing left to deliver or settle. */
async function eachHandledOnce(app: TestApp, key: string): Promise<void> {
  await waitFor(() => ['x0', 'x1', 'x2', 'x3'].every((tag) => app.recorder.calls.some((c) => tagOf(c) === tag)), {
    message: 'every fetched entry handled',
  }).catch(() => undefined);
  expect(counts([app])).toEqual({ x0: 1, x1: 1, x2: 1, x3: 1 });
  await quiesced(redis, key);
}

const add = async (app: TestApp, tag: string): Promise<string> => (await redis.client().xadd(app.key(), '*', 'tag', tag))!;
async function settled(apps: TestApp[], id: string, outcome = 'acked'): Promise<void> {
  await waitFor(() => apps.some((a) => a.settled.some((e) => e.id === id && e.outcome === outcome)), { message: `${id} ${outcome}` });
}

describe('a lost group (XGROUP DESTROY) re-created under load', () => {
  it('re-owns the entry it still owed, without replaying the acked entries after it', async () => {
    const prefix = uniquePrefix();
    const a = await start({ connection: redis.url, group: 'g', consumer: 'a', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 });
    a.recorder.behavior = (c) => {
      if (tagOf(c) === 'bad' && c.deliveryCount === 1) throw new Error('first try fails');
    };
    const bad = await add(a, 'bad');
    await settled([a], bad, 'failed');
    for (let i = 0; i < 5; i++) await settled([a], await add(a, `ok${i}`));
    await redis.client().xgroup('DESTROY', a.key(), 'g');
    await settled([a], bad);
    await settled([a], await add(a, 'after'));
    await quiesced(redis, a.key());
    expect(counts([a])).toEqual({ bad: 2, ok0: 1, ok1: 1, ok2: 1, ok3: 1, ok4: 1, after: 1 });
    // Its delivery count carried over the loss: the second try is delivery 2, not 1 again.
    expect(a.recorder.calls.filter((c) => tagOf(c) === 'bad').map((c) => c.deliveryCount)).toEqual([1, 2]);
  });

  it('re-owns 1,000 owed entries in rejoin scripts of at most 200 each (a script does bounded work)', async () => {
    const prefix = uniquePrefix();
    const a = await start({
      connection: redis.url,
      group: 'g',
      consumer: 'a',
      keyPrefix: prefix,
      blockMs: 100,
      minIdleMs: 60_000,
      batchSize: 100,
    });
    a.recorder.behavior = (c) => {
      if (tagOf(c).startsWith('bad') && c.deliveryCount === 1) throw new Error('first try fails');
    };
    const r = redis.client();
    const write = r.pipeline();
    for (let i = 0; i < 1000; i++) write.xadd(a.key(), '*', 'tag', `bad${i}`);
    const bad = ((await write.exec()) ?? []).map(([, id]) => String(id));
    const failed = () => a.settled.filter((e) => e.outcome === 'failed').length;
    await waitFor(() => failed() === 1000, { message: 'the 1,000 first tries failed', progress: failed });
    // The rejoin's scripts as the server sees them (EVALSHA of RECOVER_SCRIPT, or EVAL of its source): owed triples counted.
    const sha = createHash('sha1').update(RECOVER_SCRIPT).digest('hex');
    const triples: number[] = [];
    const monitor = await monitorCommands(redis.port, ({ args: [cmd = '', script = '', ...rest] }) => {
      if ((/^evalsha$/i.test(cmd) && script === sha) || (/^eval$/i.test(cmd) && script === RECOVER_SCRIPT))
        triples.push((rest.length - 6) / 3);
    });
    try {
      await r.xgroup('DESTROY', a.key(), 'g');
      const retried = () => a.recorder.calls.filter((c) => tagOf(c).startsWith('bad') && c.deliveryCount === 2).length;
      await waitFor(() => retried() === 1000, { message: 'the 1,000 taken back and run again', progress: retried, timeoutMs: 30_000 });
      await quiesced(redis, a.key());
    } finally {
      monitor.close();
    }
    // Each ran twice (the second try with the delivery count carried over), none a third time.
    expect(new Set(a.recorder.calls.filter((c) => c.deliveryCount === 2).map((c) => c.id))).toEqual(new Set(bad));
    expect(a.recorder.calls).toHaveLength(2000);
    expect(triples.reduce((s, n) => s + n, 0)).toBe(1000);
    expect(Math.max(...triples)).toBeLessThanOrEqual(200);
  });

  it('a rejoin of more owed entries than one script takes treats the group as lost in every call, not the first only', async () => {
    const key = `${uniquePrefix()}orders`;
    const r = redis.client();
    await createGroup(r, key);
    const write = r.pipeline();
    for (let i = 0; i < 450; i++) write.xadd(key, '*', 'tag', `x${i}`);
    const ids = ((await write.exec()) ?? []).map(([, id]) => String(id));
    await r.xreadgroup('GROUP', 'g', 'a', 'COUNT', 450, 'STREAMS', key, '>');
    // A peer re-created the group above them: nobody has them pending, and the group does not list "a".
    await r.xgroup('DESTROY', key, 'g');
    await r.xgroup('CREATE', key, 'g', '$');
    // Owed, none of them one this consumer may take back on its own (reown false): only a loss re-delivers them.
    const owed = ids.map((id) => [id, 1, false] as [string, number, boolean]);
    const { lost, owned } = await new StreamCommands(r, 'g').recoverGroup(key, 'a', ids.at(-1)!, owed, false);
    expect(lost).toBe(true);
    expect(owned).toEqual(ids);
    const [count, , , consumers] = (await r.xpending(key, 'g')) as [number, string, string, [string, string][]];
    expect(count).toBe(450);
    expect(consumers).toEqual([['a', '450']]);
  });

  it('does not re-own an owed entry that was deleted from the stream meanwhile', async () => {
    const prefix = uniquePrefix();
    const a = await start({ connection: redis.url, group: 'g', consumer: 'a', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 });
    a.recorder.behavior = (c) => {
      if (tagOf(c) === 'bad') throw new Error('fails');
    };
    const bad = await add(a, 'bad');
    await settled([a], bad, 'failed');
    await redis.client().xdel(a.key(), bad);
    for (let i = 0; i < 5; i++) await settled([a], await add(a, `ok${i}`));
    await redis.client().xgroup('DESTROY', a.key(), 'g');
    await settled([a], await add(a, 'after'));
    await quiesced(redis, a.key());
    expect(counts([a])).toEqual({ bad: 1, ok0: 1, ok1: 1, ok2: 1, ok3: 1, ok4: 1, after: 1 });
  });

  it('lets a consumer re-own what it owed even when a peer re-created the group above it first', async () => {
    const prefix = uniquePrefix();
    const base = { connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000 };
    // b comes back late (long retry delay); a comes back at once and re-creates the group.
    const b = await start({ ...base, consumer: 'b', retryInitialDelayMs: 1500 });
    b.recorder.behavior = (c) => {
      if (tagOf(c) === 'bad' && c.deliveryCount === 1) throw new Error('first try fails');
    };
    const bad = await add(b, 'bad');
    await settled([b], bad, 'failed');
    const a = await start({ ...base, consumer: 'a', retryInitialDelayMs: 10 });
    for (let i = 0; !a.settled.some((e) => e.outcome === 'acked'); i++) await settled([a, b], await add(a, `ok${i}`));
    await redis.client().xgroup('DESTROY', a.key(), 'g');
    await settled([a, b], await add(a, 'after'));
    await settled([b], bad);
    await quiesced(redis, a.key());
    const c = counts([a, b]);
    expect(c.bad).toBe(2);
    expect(Object.entries(c).filter(([tag, n]) => tag !== 'bad' && n !== 1)).toEqual([]);
  });

  it('with concurrency and a read-ahead batch out when the group goes, runs every entry once (the failed one twice)', async () => {
    const prefix = uniquePrefix();
    const r = redis.client();
    const key = `${prefix}orders`;
    await createGroup(r, key);
    for (let i = 0; i < 12; i++) await r.xadd(key, '*', 'tag', `x${i}`);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const a = await start({
      connection: redis.url,
      group: 'g',
      consumer: 'a',
      keyPrefix: prefix,
      blockMs: 100,
      minIdleMs: 60_000,
      batchSize: 6,
      concurrency: 3,
    });
    a.recorder.behavior = async (c) => {
      await gate;
      if (tagOf(c) === 'x2' && c.deliveryCount === 1) throw new Error('fails once');
    };
    // Three in hand, three waiting, six read ahead: all twelve pending under "a".
    await waitFor(async () => a.recorder.calls.length >= 3 && ((await r.xpending(key, 'g')) as [number])[0] === 12, {
      message: 'a batch in hand and one read ahead',
    });
    await r.xgroup('DESTROY', key, 'g');
    open();
    await settled([a], await add(a, 'after'));
    await waitFor(() => a.recorder.calls.filter((c) => tagOf(c) === 'x2').length === 2, { message: 'x2 retried' });
    await quiesced(redis, key);
    const c = counts([a]);
    for (let i = 0; i < 12; i++) expect(c[`x${i}`], `x${i}`).toBe(i === 2 ? 2 : 1);
  });
});

describe('a lost group noticed late', () => {
  it('gives a consumer that was busy in a handler while a peer re-created the group its failed entry back (its acks found nothing pending)', async () => {
    const prefix = uniquePrefix();
    const base = { connection: redis.url, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 60_000, retryInitialDelayMs: 10 };
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const c = await start({ ...base, consumer: 'c' });
    c.recorder.behavior = async (call) => {
      if (tagOf(call) === 'bad' && call.deliveryCount === 1) throw new Error('first try fails');
      if (tagOf(call).startsWith('slow')) await gate;
    };
    const bad = await add(c, 'bad');
    await settled([c], bad, 'failed');
    const a = await start({ ...base, consumer: 'a' });
    for (let i = 0; !a.settled.some((e) => e.outcome === 'acked'); i++) await settled([a, c], await add(a, `ok${i}`));
    // c is now in a handler; a is parked, so only a sees the NOGROUP and re-creates the group.
    for (let i = 0; !c.recorder.calls.some((call) => tagOf(call).startsWith('slow')); i++) {
      await add(c, `slow${i}`);
      await waitFor(
        () =>
          c.recorder.calls.some((call) => tagOf(call).startsWith('slow')) || a.recorder.calls.some((call) => tagOf(call) === `slow${i}`),
        { message: `slow${i} taken` },
      );
    }
    await redis.client().xgroup('DESTROY', c.key(), 'g');
    await settled([a, c], await add(a, 'after'));
    // c's handler ends; its XACK answers 0 (no error): that is how it learns the group went.
    open();
    await settled([c], bad);
    expect(c.recorder.calls.filter((call) => tagOf(call) === 'bad').map((call) => call.deliveryCount)).toEqual([1, 2]);
  });
});

describe('a group lost again while a consumer rejoins it', () => {
  it('keeps what it owed when the group is destroyed between its re-creation and the rejoin, and takes it back at the next', async () => {
    const proxy = await redisProxy(redis);
    try {
      const prefix = uniquePrefix();
      const a = await start({
        connection: `redis://127.0.0.1:${proxy.port}`,
        group: 'g',
        consumer: 'a',
        keyPrefix: prefix,
        blockMs: 100,
        minIdleMs: 60_000,
        retryInitialDelayMs: 10,
      });
      a.recorder.behavior = (c) => {
        if (tagOf(c).startsWith('bad') && c.deliveryCount === 1) throw new Error('first try fails');
      };
      // A first loss and rejoin: its script is loaded on the connection, so the next one is an EVALSHA of its hash.
      const bad1 = await add(a, 'bad1');
      await settled([a], bad1, 'failed');
      await redis.client().xgroup('DESTROY', a.key(), 'g');
      await settled([a], bad1);
      const bad2 = await add(a, 'bad2');
      await settled([a], bad2, 'failed');
      // The next rejoin's script (RECOVER_SCRIPT) is held at the proxy until the group is gone again.
      const sha = createHash('sha1').update(RECOVER_SCRIPT).digest('hex');
      proxy.holdRequestsFrom((text) => text.includes(sha));
      await redis.client().xgroup('DESTROY', a.key(), 'g');
      await waitFor(() => proxy.heldMatching(new RegExp(sha, 'g')) >= 1, { message: 'the rejoin held' });
      await redis.client().xgroup('DESTROY', a.key(), 'g');
      proxy.release();
      await settled([a], bad2);
      expect(a.recorder.calls.filter((c) => tagOf(c) === 'bad2').map((c) => c.deliveryCount)).toEqual([1, 2]);
    } finally {
      await proxy.close();
    }
  });

  it('still runs the fetched batch it had not started when the group is destroyed between its re-creation and the rejoin', async () => {
    const { logger, text } = captureLogs();
    const proxy = await redisProxy(redis);
    const prefix = uniquePrefix();
    const r = redis.client();
    const key = `${prefix}orders`;
    const { ids, wait: gate, open } = await fourEntriesAndGate(key);
    try {
      const a = await startHeldAtX0(`redis://127.0.0.1:${proxy.port}`, 'a', prefix, gate, { logger }, { retryInitialDelayMs: 10 });
      // x0 in hand, x1 waiting its turn, x2 and x3 read ahead (fetched, not started): all four pending under "a".
      await oneInHandThreeFetched(a, key);
      // A peer re-creates the lost group lower: a's lease renewal finds its four entries above it, the loss is seen.
      await r.xgroup('DESTROY', key, 'g');
      await r.xgroup('CREATE', key, 'g', '0');
      await waitFor(
        () =>
          text()
            .split('\n')
            .some((line) => line.includes(ids[0]!) && line.includes('in hand')),
        { message: "a's lease renewal to find its entries gone" },
      );
      // Once x0 and x1 are done the loop restarts to rejoin; its rejoin (RECOVER_SCRIPT, EVALSHA or EVAL) is held
      // at the proxy while the group is destroyed again, so it fails and the loop restarts once more.
      const sha = createHash('sha1').update(RECOVER_SCRIPT).digest('hex');
      const body = 'local key, group, me, highest = KEYS';
      proxy.holdRequestsFrom((t) => t.includes(sha) || t.includes(body));
      open();
      await waitFor(() => proxy.heldMatching(new RegExp(`${sha}|${body}`, 'g')) >= 1, {
        message: 'the rejoin held',
      });
      await r.xgroup('DESTROY', key, 'g');
      proxy.release();
      // Before, the second rejoin had forgotten the read-ahead batch (the first had cleared the lease): x2 and x3
      // were never handed to the handler, and the group, re-created above them, never delivered them again.
      await eachHandledOnce(a, key);
    } finally {
      open();
      await proxy.close();
    }
  });
});

describe('a group re-created below what a consumer fetched', () => {
  it('still runs a read-ahead batch whose group a peer re-created lower while the batch before it was in hand', async () => {
    const { logger, text } = captureLogs();
    const prefix = uniquePrefix();
    const r = redis.client();
    const key = `${prefix}orders`;
    const { ids, wait: gate, open } = await fourEntriesAndGate(key);
    const b = await startHeldAtX0(redis.url, 'b', prefix, gate, { logger });
    try {
      // x0 in hand, x1 waiting its turn, x2 and x3 read ahead: all four pending under "b".
      await oneInHandThreeFetched(b, key);
      // A peer that had read less re-creates the lost group lower (here at 0): nothing of b's is pending, and the
      // group's last-delivered id is below all four.
      await r.xgroup('DESTROY', key, 'g');
      await r.xgroup('CREATE', key, 'g', '0');
      // b's lease renewal meets the four in nobody's pending list (its log line names the first).
      const found = () =>
        text()
          .split('\n')
          .some((line) => line.includes(ids[0]!) && line.includes('in hand'));
      await waitFor(found, { message: "b's lease renewal to find its entries gone" });
    } finally {
      open();
    }
    // Handled once each, the read-ahead batch too (before, b moved the group forward past x2 and x3 and nobody ran them).
    await eachHandledOnce(b, key);
  });
});

describe('DeliveryMarks', () => {
  it('keeps entries it took back in a recovery owed until they are settled (a second loss before its self-drain loses nothing)', () => {
    const marks = new DeliveryMarks();
    marks.delivered([{ stream: 's', id: '1-5', fields: [], deliveryCount: 1 }]);
    // A read-ahead batch (held) was taken back: it is owed now, with the failed one.
    marks.settled({ stream: 's', id: '1-1', deliveryCount: 2, source: 'new', outcome: 'failed' });
    const owed = marks.owed('s', ['1-4', '1-5'], () => false);
    marks.keepOwned('s', owed, ['1-1', '1-4', '1-5']);
    expect(marks.owed('s', [], () => false).sort()).toEqual([
      ['1-1', 2, false],
      ['1-4', 1, false],
      ['1-5', 1, false],
    ]);
    marks.settled({ stream: 's', id: '1-4', deliveryCount: 2, source: 'drain', outcome: 'acked' });
    expect(
      marks
        .owed('s', [], () => false)
        .map(([id]) => id)
        .sort(),
    ).toEqual(['1-1', '1-5']);
  });

  it('forgets failed entries once settled, even after more failed at once than it can remember', () => {
    const marks = new DeliveryMarks();
    const base = { stream: 's', deliveryCount: 1, source: 'new' as const };
    for (let i = 0; i < 10_001; i++) marks.settled({ ...base, id: `1-${i}`, outcome: 'failed' });
    expect(marks.owed('s', [], () => false).length).toBe(10_000);
    for (let i = 0; i < 10_001; i++) marks.settled({ ...base, id: `1-${i}`, outcome: 'acked' });
    expect(marks.owed('s', [], () => false)).toEqual([]);
  });
});
