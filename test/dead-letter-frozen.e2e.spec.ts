import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { captureLogs } from './support/logs.js';
import { freezeServer } from './support/freeze.js';
import { deadLetterKey } from './support/redis-server.js';
import { pendingCount } from './support/pending.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

/**
 * A dead-letter move (maxDeliveries 1, the handler fails) sent while Redis is frozen (SIGSTOP), so that it times out
 * (commandTimeoutMs 300, well below the park's watchdog: blockMs + 2 s); thawed once the loop has given up on it.
 */
async function moveWhileFrozen(extras: Parameters<typeof start>[1], fields: string[]) {
  const prefix = uniquePrefix();
  const admin = redis.client();
  const logs = captureLogs();
  const errors: unknown[] = [];
  const app: TestApp = await start(
    { connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100, maxDeliveries: 1, commandTimeoutMs: 300 },
    { ...extras, logger: logs.logger, on: [['error', (err: unknown) => errors.push(err)]] },
  );
  let fail!: () => void;
  app.recorder.behavior = () => new Promise<void>((_, reject) => (fail = () => reject(new Error('poison'))));
  const id = (await admin.xadd(app.key(), '*', ...fields))!;
  await waitFor(() => app.recorder.calls.length === 1, { message: 'the entry in hand' });
  const thaw = await freezeServer(admin);
  try {
    fail();
    await waitFor(() => errors.length > 0 || app.settled.some((e) => e.id === id), { timeoutMs: 15_000, message: 'the move given up on' });
  } finally {
    thaw();
  }
  // The script was in Redis' input: it runs after the thaw, moves the entry and acks it, once.
  await waitFor(async () => (await admin.xlen(deadLetterKey(app.key()))) === 1, { message: 'the letter landed after the thaw' });
  const letters = await admin.xrange(deadLetterKey(app.key()), '-', '+');
  expect(letters.map(([letterId, letter]) => decodeDeadLetter(letterId, letter))).toMatchObject([{ sourceId: id, deliveryCount: 1 }]);
  return { app, admin, logs, errors, id };
}

describe('a dead-letter move Redis does not answer in time (SIGSTOP)', () => {
  it('is logged for its entry as unconfirmed; the loop restarts on it; the letter lands once, the handler ran once', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip(); // freezes the whole server
    const { app, logs, errors, id } = await moveWhileFrozen({}, ['order_id', '7']);
    expect(logs.text()).toMatch(
      new RegExp(
        `entry ${id} of stream "${app.key()}" \\(delivery 1\\): .*dead-letter move to ".*" was not confirmed by Redis \\(.*timed out.*\\)`,
      ),
    );
    expect(errors.map(String)).toEqual([expect.stringMatching(/timed out/)]);
    // No settled event for it: the move's answer never came (docs/failure-semantics.md).
    expect(app.settled.filter((e) => e.id === id)).toEqual([]);
    await waitFor(async () => (await pendingCount(redis, app.key())) === 0, { message: 'nothing pending' });
    // The restarted loop read what is pending: nothing of it, so nothing ran again.
    const next = (await redis.client().xadd(app.key(), '*', 'order_id', '8'))!;
    app.recorder.behavior = () => undefined;
    await waitFor(() => app.settled.some((e) => e.id === next && e.outcome === 'acked'), { message: 'the next entry acked' });
    expect(app.recorder.calls.map((c) => c.id)).toEqual([id, next]);
  });

  it('an ordered key goes on once the move landed (not held for a retry that never comes)', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip();
    const { app, admin, id } = await moveWhileFrozen({ defaults: false, handlers: [{ pattern: 'orders', extras: { ordered: true } }] }, [
      'data',
      '{}',
      'partitionKey',
      'k1',
    ]);
    app.recorder.behavior = () => undefined;
    const next = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
    await waitFor(() => app.settled.some((e) => e.id === next && e.outcome === 'acked'), { message: 'the next entry of k1 acked' });
    expect(app.recorder.calls.map((c) => c.id)).toEqual([id, next]);
  });
});
