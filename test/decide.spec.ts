/**
 * decide (consumer/settle/decide.ts) against its interface: one entry's checks (prepare), its
 * admission port (admit), its handler (runHandler) and the outcome, on a real Redis where the
 * decision writes there (the dead-letter move, the retry record, a pattern's block). The handler
 * (the host's dispatch) and the admissions are the test's, except the rate limit's own PatternThrottle.
 */
import { randomUUID } from 'node:crypto';
import { RateLimitedException } from 'nestjs-redis-streams';
import { PatternThrottle } from '../libs/redis-streams/src/consumer/intake/pattern-throttle.js';
import { NotYet, type Admission } from '../libs/redis-streams/src/consumer/settle/admission.js';
import {
  acked,
  admit,
  decide,
  Deciding,
  prepare,
  Ready,
  runHandler,
  startDecide,
  workFailed,
  type DecideDeps,
} from '../libs/redis-streams/src/consumer/settle/decide.js';
import type { SettledEvent } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import { isScheduled } from '../libs/redis-streams/src/consumer/settle/retry-schedule.js';
import { resolveServerOptions, type RedisStreamsServerOptions } from '../libs/redis-streams/src/options/server-options.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { groupOnNewStream } from './support/backlog.js';
import { captureLogs } from './support/logs.js';
import { pendingRows } from './support/pending.js';
import { deadLetterKey, retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();

/** A handler call as the dispatch port got it. */
type Call = { pattern: string; payload: unknown; id: string; deliveryCount: number };

/**
 * The decide deps of consumer `c` in group `g` (as the decider builds them from the options), with the
 * test's handler (`handler`) and admission; `calls` lists the handler calls.
 */
function decider(handler: (payload: unknown) => unknown = () => undefined, o: RedisStreamsServerOptions = {}, gate?: Admission) {
  const options = resolveServerOptions({ connection: redis.url, group: 'g', consumer: 'c', telemetry: false, maxDeliveries: 3, ...o });
  const { logger, lines } = captureLogs();
  const calls: Call[] = [];
  const deps: DecideDeps = {
    ...{ commands: new StreamCommands(redis.client(), 'g'), group: 'g', consumer: 'c', logger, admissionOf: () => gate },
    ...{ deadLetterStream: options.deadLetterStream, retry: options.retry, keyPrefix: options.keyPrefix },
    ...{ maxDeliveries: options.maxDeliveries, maxEntryBytes: options.maxEntryBytes, handlerTimeoutMs: options.handlerTimeoutMs },
    deserializer: options.deserializer,
    originOf: (stream) => ({ pattern: `p:${stream}` }),
    unscheduledRetryInMs: 60_000,
    dispatch: async (pattern, entry, args) => {
      calls.push({ pattern, payload: entry.payload, id: args.id, deliveryCount: args.deliveryCount });
      await handler(entry.payload);
    },
  };
  return { deps, calls, lines };
}

/** An entry added to a fresh stream and read by consumer `c` (pending under it, delivery 1), with `fields`. */
async function pendingEntry(fields: string[] = ['data', '{"n":1}']): Promise<StreamEntry> {
  const r = redis.client();
  const { key: stream } = await groupOnNewStream(r, 's');
  const id = (await r.xadd(stream, '*', ...fields))!;
  await r.xreadgroup('GROUP', 'g', 'c', 'STREAMS', stream, '>');
  return { stream, id, fields, deliveryCount: 1 };
}

/** What Redis holds of the entry now: its delivery count if pending (else null), and the ids of its dead letters. */
async function inRedis(entry: StreamEntry) {
  const r = redis.client();
  const row = (await pendingRows(redis, entry.stream)).find(([id]) => id === entry.id);
  const dead = await r.xrange(deadLetterKey(entry.stream), '-', '+');
  return { pending: row ? row[3] : null, dead: dead.length, inStream: (await r.xrange(entry.stream, entry.id, entry.id)).length };
}

describe('decide: the outcome of one entry', () => {
  it('the handler succeeds: acked (to be acked: no XACK sent here), the handler called once with the payload and its context', async () => {
    const { deps, calls } = decider();
    const entry = await pendingEntry();
    expect(await decide(deps, entry, 'new')).toEqual({
      stream: entry.stream,
      id: entry.id,
      deliveryCount: 1,
      source: 'new',
      outcome: 'acked',
    });
    expect(calls).toEqual([{ pattern: `p:${entry.stream}`, payload: { n: 1 }, id: entry.id, deliveryCount: 1 }]);
    expect(await inRedis(entry)).toEqual({ pending: 1, dead: 0, inStream: 1 });
  });

  it('the handler fails: failed, left pending, its next try logged (the idle-time default, or its retry policy recorded in Redis)', async () => {
    const boom = new Error('boom');
    const { deps, lines } = decider(() => {
      throw boom;
    });
    const entry = await pendingEntry();
    const event = await decide(deps, entry, 'new');
    expect(event).toMatchObject({ outcome: 'failed', error: boom, retryInMs: 60_000 });
    expect(isScheduled(event)).toBe(false);
    expect(lines[0]).toMatch(
      /^error handler for stream ".*" failed on entry .* \(delivery 1 of 3\): Error: boom; left pending, next try once idle 60000 ms/,
    );
    expect(await inRedis(entry)).toEqual({ pending: 1, dead: 0, inStream: 1 });
    const scheduled = decider(() => Promise.reject(boom), { retry: { backoff: () => 5_000 } });
    const second = await pendingEntry();
    const retried = await decide(scheduled.deps, second, 'reclaim');
    expect(retried).toMatchObject({ outcome: 'failed', retryInMs: 5_000, source: 'reclaim' });
    expect(isScheduled(retried)).toBe(true);
    expect(await redis.client().zscore(retrySetKey(second.stream, 'g'), second.id)).not.toBeNull();
  });

  it('maxDeliveries: an entry delivered more often is dead-lettered before its handler runs; a failure on the last allowed delivery is dead-lettered too', async () => {
    const { deps, calls } = decider(() => {
      throw new Error('still broken');
    });
    const over = { ...(await pendingEntry()), deliveryCount: 4 };
    const event = await decide(deps, over, 'reclaim');
    expect(event).toMatchObject({ outcome: 'dead-lettered', deadLetterId: expect.stringMatching(/^\d+-\d+$/) });
    expect(calls).toEqual([]);
    expect(await inRedis(over)).toEqual({ pending: null, dead: 1, inStream: 1 });
    const last = { ...(await pendingEntry()), deliveryCount: 3 };
    expect(await decide(deps, last, 'reclaim')).toMatchObject({ outcome: 'dead-lettered' });
    expect(calls).toHaveLength(1);
    expect(await inRedis(last)).toEqual({ pending: null, dead: 1, inStream: 1 });
  });

  it('an entry that does not decode is dead-lettered, its handler never called; without a dead-letter stream it is left pending', async () => {
    const { deps, calls, lines } = decider();
    const entry = await pendingEntry(['data', '{not json']);
    expect(await decide(deps, entry, 'new')).toMatchObject({ outcome: 'dead-lettered' });
    expect(calls).toEqual([]);
    expect(lines.join('\n')).toMatch(/cannot decode entry: /);
    expect(await inRedis(entry)).toMatchObject({ pending: null, dead: 1 });
    const kept = decider(undefined, { deadLetterStream: false });
    const second = await pendingEntry(['data', '{not json']);
    expect(await decide(kept.deps, second, 'new')).toMatchObject({ outcome: 'failed' });
    expect(await inRedis(second)).toMatchObject({ pending: 1, dead: 0 });
  });

  it('an entry above maxEntryBytes is dead-lettered without a copy and stays in its stream; one within it runs', async () => {
    const { deps, calls } = decider(undefined, { maxEntryBytes: 20 });
    const big = await pendingEntry(['data', JSON.stringify({ text: 'x'.repeat(40) })]);
    expect(await decide(deps, big, 'new')).toMatchObject({ outcome: 'dead-lettered' });
    expect(calls).toEqual([]);
    expect(await inRedis(big)).toEqual({ pending: null, dead: 1, inStream: 1 });
    const letters = await redis.client().xrange(deadLetterKey(big.stream), '-', '+');
    expect(letters.map(([, fields]) => fields.join(' ')).join('\n')).toMatch(
      /above maxEntryBytes \(20\) \(the entry's fields were not copied: too large\)/,
    );
    // 'data' + '{"n":1}': 11 bytes, within the bound.
    const small = await pendingEntry();
    expect(await decide(deps, small, 'new')).toMatchObject({ outcome: 'acked' });
  });

  it("an admission's NotYet: failed with it, its handler not called, tried again in its time with the delivery not counted", async () => {
    const notYet = new NotYet(2_000, 'over the limit of its key');
    const { deps, calls, lines } = decider(undefined, {}, { pass: async () => notYet, slow: () => undefined });
    const entry = await pendingEntry();
    const event = await decide(deps, entry, 'new');
    expect(event).toMatchObject({ outcome: 'failed', error: notYet, retryInMs: 2_000 });
    expect(isScheduled(event)).toBe(true);
    expect(calls).toEqual([]);
    // Waiting is the gate working: no line, and the delivery given back.
    expect(lines).toEqual([]);
    expect(await inRedis(entry)).toMatchObject({ pending: 0 });
  });

  it('an admission that throws fails the entry as its handler would (counted, logged)', async () => {
    const gate: Admission = {
      pass: () => {
        throw new Error('rateLimit.perKey threw');
      },
      slow: () => undefined,
    };
    const { deps, calls, lines } = decider(undefined, {}, gate);
    const event = await decide(deps, await pendingEntry(), 'new');
    expect(event).toMatchObject({ outcome: 'failed', retryInMs: 60_000 });
    expect(calls).toEqual([]);
    expect(lines[0]).toMatch(/^error handler for stream .* failed .*rateLimit\.perKey threw/);
  });

  it("a handler's RateLimitedException: failed, tried again when it asked, its delivery not counted, and its pattern slowed in Redis for that long", async () => {
    const name = `rl:${randomUUID().slice(0, 8)}`;
    const commands = new StreamCommands(redis.client(), 'g');
    const throttle = new PatternThrottle({ pattern: 'mail', name, limits: commands.rateLimits, consumer: 'c' });
    const { deps, lines } = decider(
      () => {
        throw new RateLimitedException(30_000);
      },
      {},
      throttle,
    );
    const entry = await pendingEntry();
    const event = await decide(deps, entry, 'new');
    expect(event).toMatchObject({ outcome: 'failed', retryInMs: 30_000 });
    expect(isScheduled(event)).toBe(true);
    expect(await inRedis(entry)).toMatchObject({ pending: 0, dead: 0 });
    expect(await redis.client().pttl(commands.rateLimits.keys(name).block)).toBeGreaterThan(20_000);
    expect(lines[0]).toMatch(
      /^warn handler for stream .* was rate limited on entry .*: left pending, next try in 30000 ms, its delivery not counted; "mail" starts nothing for 30000 ms$/,
    );
  });
});

describe('decide in steps: prepare → admit → runHandler', () => {
  it('a plain entry is Ready at once (no promise on the hot path), admitted as it is without a gate, and run', async () => {
    const { deps, calls } = decider();
    const entry = await pendingEntry();
    const ready = prepare(deps, entry, 'drain');
    expect(ready).toBeInstanceOf(Ready);
    expect((ready as Ready).payload).toEqual({ n: 1 });
    expect(admit(deps, ready as Ready, 'drain')).toBe(ready);
    expect(await runHandler(deps, ready as Ready, 'drain')).toMatchObject({ outcome: 'acked', source: 'drain' });
    expect(calls).toHaveLength(1);
  });

  it('a check that refuses the entry gives its event, not a Ready; a gate that holds it gives its event from admit', async () => {
    const { deps } = decider(undefined, {}, { pass: async () => new NotYet(1_000, 'not yet'), slow: () => undefined });
    const over = { ...(await pendingEntry()), deliveryCount: 9 };
    expect(await prepare(deps, over, 'reclaim')).toMatchObject({ outcome: 'dead-lettered' });
    const entry = await pendingEntry();
    const ready = prepare(deps, entry, 'new') as Ready;
    expect(await admit(deps, ready, 'new')).toMatchObject({ outcome: 'failed', retryInMs: 1_000 });
  });
});

/** What the batch settler's worker makes of startDecide (batch-settler.ts): the decision, or the handler's work read as acked or failed. */
async function settledViaStart(deps: DecideDeps, entry: StreamEntry, source: 'new' | 'reclaim' | 'drain') {
  const started = startDecide(deps, entry, source);
  if (started instanceof Deciding) return started.event;
  try {
    await started;
    return acked(entry, source);
  } catch (error) {
    return workFailed(deps, entry, source, error);
  }
}

describe('startDecide: decide split for a caller that awaits the handler itself (the batch settler)', () => {
  it("on the hot path it gives the handler's own promise: no promise of decide's per entry", async () => {
    const { deps, calls } = decider();
    const dispatch = deps.dispatch;
    const returned: Promise<unknown>[] = [];
    deps.dispatch = (...args) => {
      const work = dispatch(...args);
      returned.push(work);
      return work;
    };
    const entry = await pendingEntry();
    const started = startDecide(deps, entry, 'new');
    expect(started).not.toBeInstanceOf(Deciding);
    expect(returned).toHaveLength(1);
    expect(started).toBe(returned[0]);
    await started;
    expect(calls).toEqual([{ pattern: `p:${entry.stream}`, payload: { n: 1 }, id: entry.id, deliveryCount: 1 }]);
  });

  // Each case twice, on two fresh entries: once through decide, once as the settler reads startDecide; the events and Redis agree.
  const cases: [string, (payload: unknown) => unknown, Partial<StreamEntry>, string[]?, Admission?][] = [
    ['the handler succeeds', () => undefined, {}],
    ['the handler rejects', () => Promise.reject(new Error('boom')), {}],
    [
      'the handler throws at once',
      () => {
        throw new Error('sync boom');
      },
      {},
    ],
    ['it fails on its last delivery: dead-lettered', () => Promise.reject(new Error('boom')), { deliveryCount: 3 }],
    ['delivered too often: dead-lettered before its handler', () => undefined, { deliveryCount: 9 }],
    ['it does not decode: dead-lettered', () => undefined, {}, ['data', '{not json']],
    ['a gate holds it back', () => undefined, {}, undefined, { pass: async () => new NotYet(1_000, 'not yet'), slow: () => undefined }],
    ['a gate lets it pass later', () => undefined, {}, undefined, { pass: async () => undefined, slow: () => undefined }],
  ];
  it.each(cases)('%s: the same event and the same state in Redis as decide', async (_, handler, change, fields, gate) => {
    const viaDecide = decider(handler, {}, gate);
    const viaStart = decider(handler, {}, gate);
    const a = { ...(await pendingEntry(fields)), ...change };
    const b = { ...(await pendingEntry(fields)), ...change };
    const eventA = await decide(viaDecide.deps, a, 'reclaim');
    const eventB = await settledViaStart(viaStart.deps, b, 'reclaim');
    const shape = (e: SettledEvent, entry: StreamEntry) => ({
      ...e,
      stream: e.stream === entry.stream,
      id: e.id === entry.id,
      error: e.error instanceof Error ? e.error.message.replaceAll(entry.id, '<id>').replaceAll(entry.stream, '<stream>') : e.error,
      deadLetterId: e.deadLetterId === undefined ? undefined : 'set',
    });
    expect(shape(eventB, b)).toEqual(shape(eventA, a));
    expect(viaStart.calls.length).toBe(viaDecide.calls.length);
    expect(await inRedis(b)).toEqual(await inRedis(a));
  });
});
