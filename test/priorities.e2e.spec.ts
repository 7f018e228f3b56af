import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisStreamsRecord } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { deadLetterKeyOf, priorityStreamOf } from '../libs/redis-streams/src/key-names.js';
import { startFixture } from './support/fixture-process.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { useProducers } from './support/producer.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { registered, retryLater, TestWorker, uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

// Priorities (`priorities: { levels, lowerEvery }`): a record's level is a stream of its own, read highest first, with
// every lowerEvery-th read leading with a lower level. Counted outside the handler process: it appends a line per
// start to a log file (logging-worker.mjs), whose stream names the level.

const redis = useRedis();
const { children, dirs } = useLeftoversAfterEach();
const start = useApps();
const producer = useProducers();

const levelOf = (base: string, stream: string): number => {
  for (let level = 9; level > 0; level--) if (stream === priorityStreamOf(base, level, CLUSTER_MODE)) return level;
  if (stream === base) return 0;
  throw new Error(`${stream} is no level of ${base}`);
};

/** `n` entries at `level` of `base` (one MULTI: a level's backlog appears at once), each `{ n, ms }`. */
async function backlog(base: string, level: number, n: number, ms = 0): Promise<void> {
  const stream = priorityStreamOf(base, level, CLUSTER_MODE);
  const tx = redis.client().multi();
  for (let i = 0; i < n; i++) tx.xadd(stream, '*', 'data', JSON.stringify({ n: i, ms }));
  await tx.exec();
}

/** A worker process of pattern `jobs` with `priorities`; the levels (0 … n) of each handler start, in order. */
async function worker(prefix: string, options: object, priorities: object): Promise<{ levels: () => number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'prio-'));
  dirs.push(dir);
  const log = join(dir, 'log');
  await startFixture(children, 'logging-worker.mjs', [
    JSON.stringify(redis.connection),
    prefix,
    'w1',
    log,
    JSON.stringify({ concurrency: 1, batchSize: 10, ...options }),
    JSON.stringify({ priorities }),
  ]);
  const base = `${prefix}jobs`;
  return {
    levels: () =>
      existsSync(log)
        ? readFileSync(log, 'utf8')
            .split('\n')
            .filter((l) => l.startsWith('S '))
            .map((l) => levelOf(base, l.split(' ')[4]!))
        : [],
  };
}

describe('priorities: a record picks its level, higher levels are read first, the lower ones are not starved', () => {
  it('with a backlog at every level, the entries start highest level first: no lower level before a higher one is drained', async () => {
    const prefix = uniquePrefix();
    const base = `${prefix}jobs`;
    for (const level of [0, 1, 2]) await backlog(base, level, 30);
    const w = await worker(prefix, {}, { levels: 3, lowerEvery: 10 });
    await waitFor(() => w.levels().length === 90, { message: '90 entries started', timeoutMs: 30_000 });
    const levels = w.levels();
    // Reads 1-3 drain level 2, 4-6 level 1, 7-9 level 0: the 10th read (a guard's) finds nothing below the top left.
    expect(levels).toEqual([...Array(30).fill(2), ...Array(30).fill(1), ...Array(30).fill(0)]);
  });

  it('an entry of a higher level written while a lower backlog is handled starts within one read (the batch in hand and the one read ahead)', async () => {
    const prefix = uniquePrefix();
    const base = `${prefix}jobs`;
    await backlog(base, 0, 200, 5);
    const w = await worker(prefix, {}, { levels: 3 });
    await waitFor(() => w.levels().length >= 25, { message: '25 low entries started' });
    await backlog(base, 2, 3);
    // Counted once the high entries are written: what started while the write was on its way (a busy machine's
    // test process is slow to send it) started before they existed.
    const before = w.levels().length;
    await waitFor(() => w.levels().filter((l) => l === 2).length === 3, { message: 'the 3 high entries started' });
    const levels = w.levels();
    const lowBetween = levels.slice(before, levels.indexOf(2)).length;
    // At most the rest of the batch in hand (10) and the batch read ahead (10).
    expect(lowBetween).toBeLessThanOrEqual(20);
  });

  it('under a steady load of the top level, the lowest still gets the reads its guard promises (one in lowerEvery leads with it)', async () => {
    const prefix = uniquePrefix();
    const base = `${prefix}jobs`;
    await backlog(base, 1, 1000);
    await backlog(base, 0, 100);
    const w = await worker(prefix, {}, { levels: 2, lowerEvery: 5 });
    await waitFor(() => w.levels().length >= 300, { message: '300 entries started', timeoutMs: 30_000 });
    const first = w.levels().slice(0, 300);
    const low = first.filter((l) => l === 0).length;
    // Reads of 10, every 5th led by level 0: 60 of the first 300 (within a read's worth either side).
    expect(low).toBeGreaterThanOrEqual(50);
    expect(low).toBeLessThanOrEqual(70);
    // Without the guard level 0 would wait for the 1,000 above it.
  });

  it('the client writes each priority to its level; a retry and a dead letter keep the entry level', async () => {
    const prefix = uniquePrefix();
    const base = `${prefix}jobs`;
    const app = await start(
      {
        connection: redis.connection,
        group: 'g',
        keyPrefix: prefix,
        blockMs: 100,
        maxDeliveries: 2,
        retry: { backoff: { type: 'fixed', delayMs: 100 } },
      },
      { handlers: [{ pattern: 'jobs', extras: { priorities: { levels: 3 } } }] },
    );
    app.recorder.behavior = (call) => {
      const { n } = call.payload as { n: number };
      if (n === 1 && call.deliveryCount === 1) throw retryLater(100);
      if (n === 2) throw new Error('poison');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    const ids = [];
    for (const [n, priority] of [
      [0, 0],
      [1, 2],
      [2, 1],
    ] as const)
      ids.push(await lastValueFrom(client.emit('jobs', new RedisStreamsRecord({ n }, {}, { priority }))));
    await waitFor(() => app.recorder.calls.filter((c) => (c.payload as { n: number }).n === 1).length === 2, {
      message: 'entry 1 retried',
    });
    const level2 = priorityStreamOf(base, 2, CLUSTER_MODE);
    const level1 = priorityStreamOf(base, 1, CLUSTER_MODE);
    expect(app.recorder.calls.filter((c) => (c.payload as { n: number }).n === 1).map((c) => [c.stream, c.id])).toEqual([
      [level2, ids[1]],
      [level2, ids[1]],
    ]);
    expect(app.recorder.calls.find((c) => (c.payload as { n: number }).n === 0)).toMatchObject({ stream: base, id: ids[0] });
    // The poison entry of level 1: its dead letter is its level's.
    await waitFor(async () => (await redis.client().xlen(deadLetterKeyOf(level1, CLUSTER_MODE))) === 1, { message: 'its dead letter' });
    const letters = (await redis.client().xrange(deadLetterKeyOf(level1, CLUSTER_MODE), '-', '+')) as [string, string[]][];
    const fields = letters[0]![1];
    expect(fields[fields.indexOf('stream') + 1]).toBe(level1);
    expect(() => new RedisStreamsRecord({}, {}, { priority: 10 })).toThrow(/priority must be a whole number from 0 to 9, got 10/);
    await expect(lastValueFrom(client.send('jobs', new RedisStreamsRecord({}, {}, { priority: 1 })))).rejects.toThrow(
      /a request cannot carry a priority/,
    );
  });

  it('cancelScheduled finds a delayed record at any level, by its id or its idempotency key, and frees the key (review-f)', async () => {
    const prefix = uniquePrefix();
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    // A minute away: nothing moves them in while the test runs (no worker either).
    const delayed = (n: number, options: object) =>
      lastValueFrom(client.emit('jobs', new RedisStreamsRecord({ n }, {}, { delayMs: 60_000, ...options })));
    const atTwo = await delayed(1, { priority: 2 });
    const keyed = await delayed(2, { priority: 1, idempotencyKey: 'k1' });
    const atZero = await delayed(3, {});
    expect(keyed).toBe('k1');
    expect(await client.cancelScheduled('jobs', atTwo)).toBe(true);
    expect(await client.cancelScheduled('jobs', keyed)).toBe(true);
    expect(await client.cancelScheduled('jobs', atZero)).toBe(true);
    // Gone: cancelled already.
    expect(await client.cancelScheduled('jobs', atTwo)).toBe(false);
    expect(await client.cancelScheduled('jobs', 'k1')).toBe(false);
    // The key was freed: emitted again, it waits again (and is cancelled again).
    expect(await delayed(4, { priority: 1, idempotencyKey: 'k1' })).toBe('k1');
    expect(await client.cancelScheduled('jobs', 'k1')).toBe(true);
    // One key waiting at two levels (each level its own window): one call cancels it at both, level 0 or not (review-h).
    for (const levels of [
      [0, 2],
      [1, 2],
    ]) {
      for (const priority of levels) await delayed(5, { priority, idempotencyKey: 'k2' });
      expect(await client.cancelScheduled('jobs', 'k2')).toBe(true);
      expect(await client.cancelScheduled('jobs', 'k2')).toBe(false);
    }
  });

  it('refuses a wrong priorities option at start, naming it', async () => {
    const begin = (priorities: unknown, more: object = {}) =>
      new TestWorker({ connection: redis.connection, logger: false }).handle('jobs', () => undefined, { priorities, ...more }).start();
    const named = registered('jobs').replace(/[()]/g, '\\$&');
    await expect(begin({ levels: 1 })).rejects.toThrow(
      new RegExp(`"${named} priorities.levels": must be a whole number from 2 to 10, got 1`),
    );
    await expect(begin({ levels: 3, lowerEvery: 0 })).rejects.toThrow(/priorities.lowerEvery": must be a whole number from 2 to 1000/);
    await expect(begin({ levels: 2 }, { ordered: true })).rejects.toThrow(/priorities with ordered is not supported/);
  });
});
