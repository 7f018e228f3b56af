import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { captureLogs } from './support/logs.js';
import { groupOnNewStream, preloadOrders } from './support/backlog.js';
import { freezeServer } from './support/freeze.js';
import { deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/**
 * Consumer `c` of group `g` on `prefix`, on this file's own server (the one SIGSTOP freezes), blockMs 100,
 * `options` over those; commandTimeoutMs far past the test's timeout: only close()'s own bounds can end it while frozen.
 */
const startFreezable = (prefix: string, options: Partial<Parameters<typeof start>[0]>, extras: Parameters<typeof start>[1]) =>
  start(
    { connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100, commandTimeoutMs: 600_000, ...options },
    extras,
  );

describe('close() while Redis is frozen (SIGSTOP)', () => {
  it('resolves while the server is still frozen once the handler ends; what Redis did not confirm stays pending and the log says so', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip(); // freezes the whole server
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const admin = redis.client();
    const ids = await preloadOrders(admin, prefix, 4);
    const logs = captureLogs();
    const app = await startFreezable(prefix, { batchSize: 4, readAhead: false }, { logger: logs.logger });
    let release!: () => void;
    app.recorder.behavior = () => new Promise<void>((resolve) => (release = resolve));
    await waitFor(() => app.recorder.calls.length === 1, { message: 'one in hand, three waiting behind it' });
    await closeWhileFrozen(admin, app.close, logs, () => release());
    expect(logs.text()).toMatch(/not confirmed by Redis within \d+ ms/);
    const pending = (await redis.newClient().xpending(key, 'g', '-', '+', 10)) as [string, string][];
    // The three never started: their hand-back was not confirmed, still pending under "c".
    expect(pending.map(([id]) => id).filter((id) => id !== ids[0])).toEqual(ids.slice(1));
    const again = await start({ connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100 });
    await waitFor(() => again.settled.length >= 3, { message: 'the unconfirmed entries delivered again' });
    expect(again.recorder.idsOf().filter((id) => id !== ids[0])).toEqual(ids.slice(1));
  });

  /** close() must resolve while still frozen; thawed either way, so the next test has a server. */
  /**
   * close() with Redis frozen: the handler in hand finishes once close() waits on it (its stopping
   * line is logged). Thawed only after close() resolved: a close() that waits on the frozen server
   * never resolves.
   */
  async function closeWhileFrozen(
    admin: ReturnType<typeof redis.client>,
    close: () => Promise<void>,
    logs: ReturnType<typeof captureLogs>,
    finishHandler: () => void,
  ) {
    const thaw = await freezeServer(admin);
    try {
      let closed = false;
      const closing = close().then(() => (closed = true));
      await waitFor(() => logs.lines.some((l) => l.includes('consumer "c" stopping')), { message: 'close() waiting on the handler' });
      finishHandler();
      await waitFor(() => closed, { timeoutMs: 15_000, message: 'close() resolved while Redis is still frozen' });
      await closing;
    } finally {
      thaw();
    }
  }

  it('a batch handler with concurrency 2 and a read-ahead: close() resolves while frozen, the read-ahead and the acks logged as not confirmed', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const prefix = uniquePrefix();
    const logs = captureLogs();
    const Ctl = batchController('bulk', { batch: { maxSize: 5 } });
    const app = await startFreezable(prefix, { concurrency: 2 }, { controllers: [Ctl], providers: [BatchLog], logger: logs.logger });
    const log = app.app.get(BatchLog);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    log.behavior = () => released;
    const key = app.key('bulk');
    const admin = redis.client();
    const ids = await addOrders(redis, key, 30);
    await waitFor(() => log.calls.length === 2, { message: 'two calls (10 entries) in hand' });
    // The read-ahead was sent after the full batch: wait until Redis delivered it (20 pending).
    await waitFor(async () => ((await admin.xpending(key, 'g')) as [number])[0] === 20, { message: 'the read-ahead delivered' });
    await closeWhileFrozen(admin, app.close, logs, release);
    expect(logs.text()).toMatch(/not confirmed by Redis within \d+ ms/);
    expect(logs.text()).not.toMatch(/Command timed out/);
    // Nothing lost: the acked ones are gone, the rest pending (unconfirmed hand-back) or never read.
    const pending = ((await redis.newClient().xpending(key, 'g', '-', '+', 100)) as [string][]).map(([id]) => id);
    const handled = new Set(log.ids('bulk'));
    for (const id of ids.slice(10, 20)) expect(pending).toContain(id);
    for (const id of pending) expect(ids.includes(id) && (handled.has(id) || ids.indexOf(id) >= 10)).toBe(true);
  });

  it('a handler failing its last delivery while stopping: the dead-letter move is bounded, logged as not confirmed, the entry pending or dead', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const admin = redis.client();
    const { prefix, key } = await groupOnNewStream(admin);
    const id = (await admin.xadd(key, '*', 'n', '1'))!;
    const logs = captureLogs();
    const app = await startFreezable(prefix, { maxDeliveries: 1, readAhead: false }, { logger: logs.logger });
    let fail!: () => void;
    app.recorder.behavior = () => new Promise<void>((_, reject) => (fail = () => reject(new Error('boom: card declined'))));
    await waitFor(() => app.recorder.calls.length === 1, { message: 'the handler in hand' });
    await closeWhileFrozen(admin, app.close, logs, () => fail());
    const line = logs.lines.find((l) => l.includes(`entry ${id} of stream "${key}"`) && l.includes('not confirmed'));
    expect(line, logs.text()).toMatch(/dead-letter move .*not confirmed by Redis within \d+ ms of stopping/);
    // The move is one script: either the dead letter exists and the entry is acked, or it is still pending under "c".
    const client = redis.newClient();
    const pending = ((await client.xpending(key, 'g', '-', '+', 10)) as [string, string][]).map(([p, owner]) => `${p} ${owner}`);
    const dead = await client.xlen(deadLetterKey(key));
    expect(pending.length + dead).toBe(1);
    if (pending.length === 1) expect(pending).toEqual([`${id} c`]);
  });
});
