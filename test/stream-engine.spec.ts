/**
 * The engine without Nest: a plan from planStreams, a plain DispatchPort object and a plain
 * logger, against a real Redis. No Nest module is imported here.
 */
import type { DecodedEntry } from '../libs/redis-streams/src/codec/entry-codec.js';
import type { EntryContextArgs } from '../libs/redis-streams/src/consumer/settle/entry-context.js';
import type { SettledEvent } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import type { DispatchPort } from '../libs/redis-streams/src/engine/dispatch-port.js';
import { planStreams, type HandlerInfo } from '../libs/redis-streams/src/engine/plan.js';
import { StreamEngine } from '../libs/redis-streams/src/engine/stream-engine.js';
import { resolveServerOptions, type RedisStreamsServerOptions } from '../libs/redis-streams/src/options/server-options.js';
import { RedisStreamsStatus } from '../libs/redis-streams/src/status.js';
import { pendingIds } from './support/pending.js';
import { freePort } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { gate } from './support/gate.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const engines: StreamEngine[] = [];
afterEach(async () => void (await Promise.all(engines.splice(0).map((e) => e.close()))));

interface Call {
  pattern: string;
  payload: unknown;
  stream: string;
  id: string;
  deliveryCount: number;
}

const eventHandler = (pattern: string, extras: Record<string, unknown> = {}): HandlerInfo => ({
  pattern,
  isEventHandler: true,
  chain: [extras],
});

/** An engine reading `handlers`, calling `handle` for each entry; everything it logs and emits, kept. */
function engine(input: RedisStreamsServerOptions, handlers: HandlerInfo[], handle: (call: Call) => unknown = () => undefined) {
  const options = resolveServerOptions({ group: 'g', consumer: 'c', telemetry: false, blockMs: 200, ...input });
  const calls: Call[] = [];
  const port: DispatchPort = {
    dispatch: async (pattern: string, entry: DecodedEntry, args: EntryContextArgs) => {
      const call = { pattern, payload: entry.payload, stream: args.stream, id: args.id, deliveryCount: args.deliveryCount };
      calls.push(call);
      return handle(call);
    },
    dispatchBatch: async () => undefined,
  };
  const lines: string[] = [];
  const logger = {
    log: (m: string) => void lines.push(m),
    warn: (m: string) => void lines.push(m),
    error: (m: string) => void lines.push(m),
  };
  // Nothing ends close()'s wait early here (the hosts pass a second signal, an AbortSignal).
  const e = new StreamEngine(options, port, logger, () => ({ interrupted: new Promise<string>(() => {}), dispose: () => {} }));
  engines.push(e);
  const settled: SettledEvent[] = [];
  e.on('settled', (event) => void settled.push(event));
  const statuses: RedisStreamsStatus[] = [];
  e.status$.subscribe((s) => statuses.push(s));
  const plan = planStreams(handlers, { keyPrefix: options.keyPrefix, deadLetterStream: options.deadLetterStream, onCluster: false });
  return { engine: e, plan, calls, settled, statuses, lines };
}

describe('StreamEngine without Nest', () => {
  it('start() resolves once the group exists; each entry goes to the port with its payload and context, then is acked and reported', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const t = engine({ connection: redis.url, keyPrefix: prefix }, [eventHandler('orders')]);
    expect((await t.engine.health()).state).toBe('starting');
    await t.engine.start(t.plan);
    const groups = (await redis.client().xinfo('GROUPS', key)) as unknown[][];
    expect(groups.map((g) => g[1])).toEqual(['g']);
    expect((await t.engine.health({ stats: false })).state).toBe('running');
    const id = await redis.client().xadd(key, '*', 'data', JSON.stringify({ order: 7 }));
    await waitFor(() => t.settled.length === 1, { message: 'the entry settled' });
    expect(t.calls).toEqual([{ pattern: 'orders', payload: { order: 7 }, stream: key, id, deliveryCount: 1 }]);
    expect(t.settled[0]).toMatchObject({ stream: key, id, outcome: 'acked', source: 'new', deliveryCount: 1 });
    expect(await pendingIds(redis, key)).toEqual([]);
    expect(t.statuses).toContain(RedisStreamsStatus.CONNECTED);
    await t.engine.close();
    expect(t.statuses).toContain(RedisStreamsStatus.CLOSING);
    expect(t.statuses.at(-1)).toBe(RedisStreamsStatus.CLOSED);
    expect((await t.engine.health()).state).toBe('stopped');
  });

  it('a handler that fails is retried by its policy, then dead-lettered after maxDeliveries', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const t = engine(
      { connection: redis.url, keyPrefix: prefix, maxDeliveries: 2, retry: { backoff: { type: 'fixed', delayMs: 50 } } },
      [eventHandler('orders')],
      () => {
        throw new Error('refused');
      },
    );
    await t.engine.start(t.plan);
    const id = await redis.client().xadd(key, '*', 'data', '"x"');
    await waitFor(() => t.settled.length === 2, { message: 'the entry failed, then dead-lettered' });
    expect(t.settled.map((e) => [e.outcome, e.deliveryCount])).toEqual([
      ['failed', 1],
      ['dead-lettered', 2],
    ]);
    expect(t.settled[0]).toMatchObject({ retryInMs: 50, error: new Error('refused') });
    expect(t.calls.map((c) => c.id)).toEqual([id, id]);
    const dead = await redis.client().xrange(`${key}:dead`, '-', '+');
    expect(dead.map(([deadId]) => deadId)).toEqual([t.settled[1]!.deadLetterId]);
    expect(await pendingIds(redis, key)).toEqual([]);
  });

  it('close() stops at a settle point: the entry in hand finishes and is acked, no new one is taken; start() after close() rejects', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const g = gate();
    const t = engine({ connection: redis.url, keyPrefix: prefix, batchSize: 1 }, [eventHandler('orders')], () => g.wait);
    await t.engine.start(t.plan);
    const [first] = [await redis.client().xadd(key, '*', 'data', '1'), await redis.client().xadd(key, '*', 'data', '2')];
    await waitFor(() => t.calls.length === 1, { message: 'the first handler running' });
    const closing = t.engine.close();
    await waitFor(() => t.statuses.includes(RedisStreamsStatus.CLOSING), { message: 'closing begun' });
    g.open();
    await closing;
    expect(t.calls.map((c) => c.id)).toEqual([first]);
    expect(t.settled.map((e) => [e.id, e.outcome])).toEqual([[first, 'acked']]);
    expect(await pendingIds(redis, key)).not.toContain(first);
    await expect(t.engine.start(t.plan)).rejects.toThrow(/closed before it started/);
  });

  it('a graceful close() reports closing then closed, never a connection state between them', async () => {
    // ioredis reports a closed connection ('end') on a later tick than quit() resolves: a fold still
    // listening then said `disconnected` during a normal shutdown (found in 2 of 30 cycles).
    for (let cycle = 0; cycle < 40; cycle++) {
      const prefix = uniquePrefix();
      const t = engine({ connection: redis.url, keyPrefix: prefix }, [eventHandler('orders')]);
      await t.engine.start(t.plan);
      await t.engine.close();
      const after = t.statuses.slice(t.statuses.indexOf(RedisStreamsStatus.CLOSING));
      expect({ cycle, after }).toEqual({ cycle, after: [RedisStreamsStatus.CLOSING, RedisStreamsStatus.CLOSED] });
    }
  });

  it('close() in the same tick as start(), telemetry on: start() rejects, and status$ still says closing then closed', async () => {
    const t = engine({ connection: redis.url, keyPrefix: uniquePrefix(), telemetry: true }, [eventHandler('orders')]);
    const started = t.engine.start(t.plan).then(
      () => 'started',
      (err: unknown) => (err as Error).message,
    );
    await t.engine.close();
    expect(await started).toMatch(/closed before it started/);
    expect(t.statuses.slice(-2)).toEqual([RedisStreamsStatus.CLOSING, RedisStreamsStatus.CLOSED]);
  });

  it('start() rejects after startupTimeoutMs when Redis cannot be reached, without the password in what it says', async () => {
    const port = await freePort();
    const t = engine({ connection: `redis://:hunter2@127.0.0.1:${port}`, startupTimeoutMs: 300 }, [eventHandler('orders')]);
    const outcome = await t.engine.start(t.plan).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(outcome).toBeInstanceOf(Error);
    expect(outcome!.message).toMatch(/300 ms|startupTimeoutMs/);
    expect(outcome!.message).not.toContain('hunter2');
    await t.engine.close();
    expect(t.lines.join('\n')).not.toContain('hunter2');
  });
});
