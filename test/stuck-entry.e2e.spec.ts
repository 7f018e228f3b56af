import { checkLiveness } from 'nestjs-redis-streams';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { captureLogs } from './support/logs.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

describe('an entry in hand past stuckEntryMs', () => {
  it('is reported while it lasts: a WARN naming stream, id, consumer and age (repeated), the health snapshot, and liveness down naming it', async () => {
    const logs = captureLogs();
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'hung', keyPrefix: uniquePrefix(), blockMs: 100, stuckEntryMs: 200 },
      { logger: logs.logger },
    );
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    onTestFinished(() => release());
    app.recorder.behavior = () => released;
    const id = await redis.client().xadd(app.key(), '*', 'n', '1');
    const stuckLine = new RegExp(`^warn entry ${id} of "${app.key()}" in hand for (\\d+) ms \\(consumer "hung"`);
    await waitFor(() => logs.lines.filter((l) => stuckLine.test(l)).length >= 2, { message: 'the stuck entry reported twice' });
    const ages = logs.lines.flatMap((l) => stuckLine.exec(l)?.[1] ?? []).map(Number);
    expect(ages[0]).toBeGreaterThanOrEqual(200);
    expect(ages[1]).toBeGreaterThan(ages[0]!);

    const health = await app.server.health({ stats: false });
    const stream = health.streams.find((s) => s.stream === app.key())!;
    expect(stream.oldestInHand?.id).toBe(id);
    expect(stream.oldestInHand!.forMs).toBeGreaterThanOrEqual(200);
    expect(stream.stuckEntries).toBe(1);
    // The loop has not beaten since the handler began: liveness fails past the bound, naming the entry.
    const verdict = checkLiveness(health, { stuckLoopMs: 200 });
    expect(verdict.up).toBe(false);
    expect(verdict.reasons.join()).toContain(`entry ${id} of "${app.key()}"`);
    // Within the default bound (5 min) it is still live.
    expect(checkLiveness(health).up).toBe(true);

    release();
    await waitFor(() => app.settled.length === 1, { message: 'the entry settled' });
    const after = (await app.server.health({ stats: false })).streams.find((s) => s.stream === app.key())!;
    expect(after.oldestInHand).toBeUndefined();
    expect(after.stuckEntries).toBe(0);
  });

  it('close() names the entries it waits for and for how long; with nothing in hand it says nothing of an entry in hand', async () => {
    const logs = captureLogs();
    const idle = await start(
      { connection: redis.connection, group: 'g', consumer: 'idle', keyPrefix: uniquePrefix(), blockMs: 100 },
      { logger: logs.logger },
    );
    await idle.close();
    expect(logs.lines.filter((l) => /consumer "idle" stopping/.test(l))).toEqual(['log consumer "idle" stopping: nothing in hand']);

    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'busy', keyPrefix: uniquePrefix(), blockMs: 100 },
      { logger: logs.logger },
    );
    let release!: () => void;
    app.recorder.behavior = () => new Promise<void>((resolve) => (release = resolve));
    const id = await redis.client().xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the handler to start' });
    const closing = app.close();
    await waitFor(() => logs.lines.some((l) => l.includes('consumer "busy" stopping')), { message: 'the stopping line' });
    const line = logs.lines.find((l) => l.includes('consumer "busy" stopping'))!;
    expect(line).toMatch(
      new RegExp(
        `^log consumer "busy" stopping: waiting for 1 entry in hand \\(at most 20000 ms\\): "${app.key()}" ${id} \\(handler running for \\d+ ms\\)$`,
      ),
    );
    release();
    await closing;
  });

  it('a stuck batch call is one WARN per period naming the stream, the count and the first ids; the shutdown lines cap the ids too', async () => {
    const logs = captureLogs();
    const Ctl = batchController('bulk', { batch: { maxSize: 50 } });
    const app = await start(
      {
        connection: redis.connection,
        group: 'g',
        consumer: 'hung',
        keyPrefix: uniquePrefix(),
        blockMs: 100,
        stuckEntryMs: 200,
        shutdownTimeoutMs: 300,
      },
      { controllers: [Ctl], providers: [BatchLog], logger: logs.logger },
    );
    const log = app.app.get(BatchLog);
    log.behavior = () => new Promise<void>(() => {});
    const key = app.key('bulk');
    const ids = await addOrders(redis, key, 50);
    await waitFor(() => log.calls.length === 1 && log.calls[0]!.ids.length === 50, { message: 'one call of 50 in hand' });
    const stuck = () => logs.lines.filter((l) => l.startsWith('warn ') && l.includes('in hand for'));
    await waitFor(() => stuck().length >= 2, { message: 'the stuck call reported twice' });
    const first = `entries ${ids.slice(0, 3).join(', ')} and 47 more of "${key}" in hand for`;
    // One line per period for the whole call, never one per entry.
    expect(
      stuck()
        .slice(0, 2)
        .map((l) => l.includes(first)),
    ).toEqual([true, true]);
    await app.close();
    const shutdown = logs.lines.filter((l) => l.includes('consumer "hung" stopping') || l.includes('abandoning'));
    expect(shutdown).toHaveLength(2);
    for (const line of shutdown) {
      expect(line).toContain(`"${key}" ${ids.slice(0, 3).join(', ')} and 47 more (handler running for`);
      expect(line.length).toBeLessThan(600);
    }
  });
});
