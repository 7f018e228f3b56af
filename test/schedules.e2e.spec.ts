import { InvalidOptionError, isReadableSchedule, Schedules, serveDashboard } from 'nestjs-redis-streams';
import type { StreamConsumerOptions } from 'nestjs-redis-streams/core';
import { useProducers } from './support/producer.js';
import { TestWorker, uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';
import { redisNow } from './support/redis-clock.js';
import { delayedKeysOf, scheduleKeysOf } from '../libs/redis-streams/src/key-names.js';
import { runCli } from './support/cli.js';

// Repeatable schedules against a real server, workers in this process (test/schedules-crash.e2e.spec.ts kills
// worker processes). Counting is done on the stream itself (XRANGE): a second fire of one time would show twice.

const redis = useRedis();
const startProducer = useProducers();
const { consumers } = useLeftoversAfterEach();

function consumer(prefix: string, options: StreamConsumerOptions = {}): TestWorker {
  const c = new TestWorker({
    connection: redis.connection,
    group: 'g',
    blockMs: 100,
    minIdleMs: 2000,
    flowCheckMs: 100,
    logger: false,
    keyPrefix: prefix,
    ...options,
  });
  consumers.push(c);
  return c;
}

const msOf = (id: string) => Number(id.split('-')[0]);

/** The fires in `stream`: per entry its id, schedule id, fire time and payload. */
async function fires(stream: string): Promise<{ id: string; schedule: string; at: number; payload: unknown }[]> {
  const rows = (await redis.client().xrange(stream, '-', '+')) as [string, string[]][];
  return rows.map(([id, f]) => ({
    id,
    schedule: f[f.indexOf('scheduleId') + 1]!,
    at: Number(f[f.indexOf('fireTime') + 1]),
    payload: JSON.parse(f[f.indexOf('data') + 1]!) as unknown,
  }));
}

/** Each (schedule, fire time) once, none visible before its fire time (the stream id is Redis' time when it went in). */
function checkExactlyOnce(list: { id: string; schedule: string; at: number }[]): number[] {
  const keys = list.map((e) => `${e.schedule}@${e.at}`);
  expect(keys.length).toBe(new Set(keys).size);
  const lateness = list.map((e) => msOf(e.id) - e.at);
  expect(lateness.filter((l) => l < 0)).toEqual([]);
  return lateness;
}

describe('repeatable schedules', () => {
  it('fires every 300 ms through three workers: each fire once, none early', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}ticks`;
    const handled: unknown[] = [];
    for (let w = 0; w < 3; w++)
      await consumer(prefix, { consumer: `w${w}` })
        .handle('ticks', (p: unknown) => void handled.push(p))
        .start();
    const producer = await startProducer({ connection: redis.connection, keyPrefix: prefix });
    const set = await producer.client.schedules.set('ticks', 'tick', { every: 300, payload: { kind: 'tick' } });
    expect(set.created).toBe(true);
    await waitFor(async () => (await fires(stream)).length >= 10, { message: '10 fires', timeoutMs: 15_000 });
    const list = await fires(stream);
    const lateness = checkExactlyOnce(list);
    // Consecutive fire times, 300 ms apart: none skipped, none twice.
    const times = list.map((e) => e.at).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(300);
    expect(list.every((e) => (e.payload as { kind: string }).kind === 'tick')).toBe(true);
    await waitFor(() => handled.length >= 10, { message: '10 handled' });
    lateness.sort((a, b) => a - b);
    console.log(`schedules: lateness p50 ${lateness[Math.floor(lateness.length / 2)]} ms, max ${lateness.at(-1)} ms (flowCheckMs 100)`);
  });

  it('an update takes effect at the next fire and never fires one time twice; a remove stops it at once', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}ticks`;
    for (let w = 0; w < 3; w++)
      await consumer(prefix, { consumer: `w${w}` })
        .handle('ticks', () => undefined)
        .start();
    const producer = await startProducer({ connection: redis.connection, keyPrefix: prefix });
    const s = producer.client.schedules;
    await s.set('ticks', 'a', { every: 200, payload: { v: 1 } });
    await waitFor(async () => (await fires(stream)).length >= 3, { message: '3 fires of v1' });
    // Updates while the workers fire: each must land between fires, never repeat a fire time.
    for (let v = 2; v <= 6; v++) {
      await s.set('ticks', 'a', { every: 200, payload: { v } });
      const seen = (await fires(stream)).length;
      await waitFor(async () => (await fires(stream)).length >= seen + 2, { message: `2 fires after update ${v}` });
      const latest = (await fires(stream)).at(-1)!;
      expect((latest.payload as { v: number }).v).toBe(v);
    }
    const before = await fires(stream);
    checkExactlyOnce(before);
    expect(await s.remove('ticks', 'a')).toBe(true);
    const removedAt = await redisNow(redis.client());
    expect(await s.get('ticks', 'a')).toBeUndefined();
    expect(await s.remove('ticks', 'a')).toBe(false);
    // Nothing it handed over goes in after the remove: 1.5 s of looks (flowCheckMs 100) later, no entry is newer.
    const start = Date.now();
    await waitFor(() => Date.now() - start >= 1500, { message: '1.5 s', intervalMs: 100 });
    const after = await fires(stream);
    expect(after.filter((e) => msOf(e.id) > removedAt)).toEqual([]);
    expect(await redis.client().zcard(delayedKeysOf(stream, redis.cluster).schedule)).toBe(0);
    expect(await redis.client().exists(...Object.values(scheduleKeysOf(stream, redis.cluster)))).toBe(0);
  });

  it("catches up a fire missed while no worker ran: once, late ('once'), or not at all ('skip')", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    const producer = await startProducer({ connection: redis.connection, keyPrefix: prefix });
    await producer.client.schedules.set('jobs', 'once', { every: 3_600_000, payload: 'once' });
    await producer.client.schedules.set('jobs', 'skip', { every: 3_600_000, payload: 'skip', catchUp: 'skip' });
    // As if every worker had been down across a fire 30 s ago (and the ones before it).
    const missed = (await redisNow(redis.client())) - 30_000;
    const keys = scheduleKeysOf(stream, redis.cluster);
    await redis.client().zadd(keys.next, missed, 'once', missed, 'skip');
    await consumer(prefix)
      .handle('jobs', () => undefined)
      .start();
    await waitFor(async () => (await fires(stream)).length >= 1, { message: 'the missed fire' });
    await waitFor(async () => Number(await redis.client().zscore(keys.next, 'skip')) > missed, { message: 'skip moved on' });
    const now = await redisNow(redis.client());
    const list = await fires(stream);
    expect(list.map((e) => [e.schedule, e.at])).toEqual([['once', missed]]);
    // Both next fires are the first after now, in the future.
    const next = await producer.client.schedules.list('jobs');
    for (const s of next) {
      if (!isReadableSchedule(s)) throw new Error('unreadable');
      expect(s.nextFireAt).toBeGreaterThan(now - 1000);
      expect(s.nextFireAt! % 3_600_000).toBe(0);
    }
  });

  it('ends after endAt, fires a cron schedule in its time zone, and lists and gets what is stored', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    await consumer(prefix)
      .handle('jobs', () => undefined)
      .start();
    const schedules = new Schedules(redis.client());
    const now = await redisNow(redis.client());
    await schedules.set(stream, 'short', { every: 100, startAt: now + 200, endAt: now + 200 + 4 * 100, payload: 1 });
    await schedules.set(stream, 'berlin', { cron: '0 3 * * *', tz: 'Europe/Berlin', payload: 2, headers: { h: 'x' }, partitionKey: 'k' });
    await waitFor(async () => (await schedules.get(stream, 'short')) === undefined, { message: 'short to end' });
    // Its last fire was handed over as it ended: it goes in at its time.
    await waitFor(async () => (await fires(stream)).length >= 5, { message: 'the last fire' });
    const list = await fires(stream);
    expect(list.map((e) => e.at)).toEqual([0, 1, 2, 3, 4].map((k) => now + 200 + k * 100));
    const berlin = await schedules.get(stream, 'berlin');
    if (!berlin || !isReadableSchedule(berlin)) throw new Error('berlin not stored');
    expect(berlin).toMatchObject({ cron: '0 3 * * *', tz: 'Europe/Berlin', catchUp: 'once' });
    expect(berlin.fields).toEqual(['data', '2', 'headers', '{"h":"x"}', 'partitionKey', 'k']);
    // 03:00 in Berlin is 01:00 or 02:00 UTC, whichever DST says.
    expect([1, 2]).toContain(new Date(berlin.nextFireAt!).getUTCHours());
    expect((await schedules.list(stream)).map((s) => s.id)).toEqual(['berlin']);
  });

  it('refuses bad options with a message naming each', async () => {
    const producer = await startProducer({ connection: redis.connection, keyPrefix: uniquePrefix() });
    const s = producer.client.schedules;
    const refused = async (spec: unknown, option: string) => {
      const err = await s.set('jobs', 'x', spec as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as InvalidOptionError).option).toBe(option);
    };
    await refused({ cron: '61 * * * *' }, 'cron');
    await refused({ cron: '0 3 * * *', tz: 'Mars/Olympus' }, 'tz');
    await refused({ every: 5 }, 'every');
    await refused({ every: 1000, cron: '* * * * *' }, 'every');
    await refused({}, 'every');
    await refused({ every: 1000, catchUp: 'all' }, 'catchUp');
    await refused({ every: 1000, startAt: new Date('x') }, 'startAt');
    await refused({ every: 1000, startAt: 2000, endAt: 1000 }, 'endAt');
    await refused({ every: 1000, endAt: 1000 }, 'endAt');
    await refused({ every: 1000, evrey: 1 }, 'evrey');
    await refused({ every: 1000, headers: { a: 1 } }, 'headers.a');
    await refused({ every: 1000, payload: 'x'.repeat(70_000) }, 'payload');
    await refused({ every: 1000, payload: 1n }, 'payload');
    const err = await s.set('jobs', '', { every: 1000 }).catch((e: unknown) => e);
    expect((err as InvalidOptionError).option).toBe('id');
  });

  it('the CLI sets, lists and removes a schedule, and names a bad option', async () => {
    const stream = `${uniquePrefix()}jobs`;
    const cli = (...args: string[]) => runCli(redis, ['schedules', ...args]);
    const set = await cli('set', stream, 'nightly', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '--payload', '{"report":"daily"}');
    expect(set.stderr).toBe('');
    expect(set.stdout).toMatch(/^created schedule "nightly" of ".*jobs": next fire \d{4}-\d\d-\d\dT0[01]:00:00.000Z\n$/);
    expect((await cli('set', stream, 'tick', '--every', '60000', '--catch-up', 'skip')).code).toBe(0);
    const list = await cli('list', stream);
    expect(list.stdout).toMatch(
      /^nightly {2}cron "0 2 \* \* \*" Europe\/Berlin {2}next \S+ {2}last - {2}catch-up once\ntick {2}every 60000 ms {2}next \S+ {2}last - {2}catch-up skip\n$/,
    );
    const listed = JSON.parse((await cli('list', stream, '--json')).stdout) as { id: string; fields: string[] }[];
    expect(listed.find((s) => s.id === 'nightly')!.fields).toEqual(['data', '{"report":"daily"}']);
    const bad = await cli('set', stream, 'x', '--cron', '0 2 * * *', '--tz', 'Nowhere/Land');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid option "tz": must be an IANA time zone/);
    expect((await cli('set', stream, 'x')).stderr).toMatch(/needs --every MS or --cron EXPR/);
    expect((await cli('remove', stream, 'tick')).stdout).toMatch(/^removed schedule "tick"/);
    const again = await cli('remove', stream, 'tick');
    expect(again.code).toBe(1);
    expect((await cli('list', stream)).stdout).toMatch(/^nightly /);
  });

  it("the dashboard lists a stream's schedules with their next fire, and removes one (an action)", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    // A group, so that the dashboard shows the stream.
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const schedules = new Schedules(redis.client());
    await schedules.set(stream, 'nightly', { cron: '30 2 * * *', tz: 'Europe/Berlin', payload: 1 });
    await schedules.set(stream, '<img src=x>', { every: 60_000, payload: 2 });
    const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, actionsPassword: 'act10n' });
    try {
      const auth = { authorization: `Basic ${Buffer.from('ops:act10n').toString('base64')}` };
      const page = (await (await fetch(`${url}api/schedules?key=${encodeURIComponent(stream)}`, { headers: auth })).json()) as {
        total: number;
        schedules: { id: string; timing: string; nextFireAt: number }[];
      };
      expect(page.total).toBe(2);
      const nightly = page.schedules.find((x) => x.id === 'nightly')!;
      expect(nightly.timing).toBe('cron 30 2 * * * Europe/Berlin');
      expect(nightly.nextFireAt).toBeGreaterThan(Date.now() - 60_000);
      const remove = (id: string, headers: Record<string, string>) =>
        fetch(`${url}api/schedules/remove`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ key: stream, id }),
        });
      // Without the page's header (a cross-site form), refused.
      expect((await remove('nightly', auth)).status).toBe(403);
      const done = await remove('nightly', { ...auth, 'x-requested-by': 'redis-streams-dashboard' });
      expect(await done.json()).toEqual({ removed: true });
      expect(await schedules.get(stream, 'nightly')).toBeUndefined();
      expect((await schedules.list(stream)).map((x) => x.id)).toEqual(['<img src=x>']);
    } finally {
      server.close();
    }
  });
});

describe('repeatable schedules: records written by hand or by another version (review findings)', () => {
  /** A record as `set` writes it (v1), with `over` changing members. */
  const record = (id: string, over: Record<string, unknown>) =>
    JSON.stringify({ v: 1, id, rev: 'r1', every: 1000, catchUp: 'once', fields: ['data', '{}'], createdAt: 0, updatedAt: 0, ...over });

  it('a damaged record never fires (nor again and again) and holds nobody up: parked, listed unreadable; a later version is passed over', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}ticks`;
    const k = scheduleKeysOf(stream, CLUSTER_MODE);
    const now = await redisNow(redis.client());
    const forged: [string, string][] = [
      ['nan-every', record('nan-every', { every: 'abc' })],
      ['zero-every', record('zero-every', { every: 0 })],
      ['negative-every', record('negative-every', { every: -1000 })],
      ['tiny-every', record('tiny-every', { every: 1 })],
      ['text-start', record('text-start', { startAt: 'abc' })],
      ['not-json', '{"v":1,'],
    ];
    // Due before the good one, and more of a later version than a look takes (200): all ahead of it.
    const tx = redis.client().multi();
    for (const [id, value] of forged) tx.hset(k.records, id, value).zadd(k.next, now - 10_000, id);
    for (let i = 0; i < 300; i++)
      tx.hset(k.records, `v9-${i}`, JSON.stringify({ v: 9, id: `v9-${i}` })).zadd(k.next, now - 5_000 + i, `v9-${i}`);
    await tx.exec();
    const schedules = new Schedules(redis.client());
    await schedules.set(stream, 'good', { every: 200, payload: {} });
    // A damaged last fire of the good one (an operator's edit) counts as none.
    await redis.client().hset(k.fired, 'good', 'garbage');
    await consumer(prefix)
      .handle('ticks', () => undefined)
      .start();
    await waitFor(async () => (await fires(stream)).filter((f) => f.schedule === 'good').length >= 5, { message: '5 fires of good' });
    const list = await fires(stream);
    expect(list.filter((f) => f.schedule !== 'good')).toEqual([]);
    checkExactlyOnce(list);
    // The damaged ones parked out of every look; the later version's left as they were, for its workers.
    for (const [id] of forged) expect(Number(await redis.client().zscore(k.next, id))).toBeGreaterThan(now + 86_400_000 * 365 * 1000);
    expect(Number(await redis.client().zscore(k.next, 'v9-0'))).toBe(now - 5_000);
    const page = await schedules.list(stream);
    expect(
      page
        .filter((s) => !isReadableSchedule(s))
        .map((s) => s.id)
        .sort(),
    ).toEqual(expect.arrayContaining(forged.map(([id]) => id).sort()));
  });
});
