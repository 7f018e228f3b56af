import { describe, expect, it } from 'vitest';
import { MAX_SLOT_LANES, planStreams, type HandlerInfo, type PlanOptions } from '../libs/redis-streams/src/engine/plan.js';
import { slotOf } from '../libs/redis-streams/src/slots.js';
import { deadLetterKeyOf } from '../libs/redis-streams/src/key-names.js';
import { STREAM_PATTERN_EXTRAS } from '../libs/redis-streams/src/options/pattern-options.js';
import { InvalidOptionError } from '../libs/redis-streams/src/options/validate.js';

const ONE_NODE: PlanOptions = { keyPrefix: 'p:', deadLetterStream: (s) => `${s}:dead`, onCluster: false };
const CLUSTER: PlanOptions = { keyPrefix: 'p:', deadLetterStream: (s) => deadLetterKeyOf(s, true), onCluster: true };

const event = (pattern: string, ...chain: Record<string, unknown>[]): HandlerInfo => ({
  pattern,
  isEventHandler: true,
  chain: chain.length > 0 ? chain : [{}],
});
const request = (pattern: string, extras: Record<string, unknown> = {}): HandlerInfo => ({
  pattern,
  isEventHandler: false,
  chain: [extras],
});

describe('plan: handlers and options → streams and readers, without Redis', () => {
  it('a plain pattern is one key, a partitioned one n keys, each with its origin', () => {
    const plan = planStreams([event('a'), event('orders', { partitions: 3 }), request('rpc')], ONE_NODE);
    expect(plan.streams).toEqual(['p:a', 'p:{orders:0}', 'p:{orders:1}', 'p:{orders:2}', 'p:rpc']);
    expect(plan.origins.get('p:a')).toEqual({ pattern: 'a' });
    expect(plan.origins.get('p:{orders:2}')).toEqual({ pattern: 'orders', partition: 2 });
    // One node: one reader for every single-entry stream.
    expect(plan.readers).toEqual([{ streams: plan.streams }]);
  });

  it('an ordered pattern: each partition a reader of its own (it reads only while it owns it), flagged in its origin', () => {
    const plan = planStreams([event('a'), event('orders', { ordered: true, partitions: 2 }), event('audit', { ordered: true })], ONE_NODE);
    expect(plan.readers).toEqual([
      { streams: ['p:a'] },
      { streams: ['p:{orders:0}'], ordered: { pattern: 'orders', partition: 0, partitions: 2 } },
      { streams: ['p:{orders:1}'], ordered: { pattern: 'orders', partition: 1, partitions: 2 } },
      { streams: ['p:audit'], ordered: { pattern: 'audit', partition: 0, partitions: 1 } },
    ]);
    expect(plan.origins.get('p:{orders:1}')).toEqual({ pattern: 'orders', partition: 1, ordered: true });
  });

  it('keeps an ordered (and a rate-limited) reader what it is on a cluster', () => {
    const plan = planStreams(
      [event('orders', { ordered: true, partitions: 2 }), event('mail', { rateLimit: { max: 5, perMs: 1000 } })],
      CLUSTER,
    );
    expect(plan.readers).toEqual([
      { streams: ['p:{orders:0}'], ordered: { pattern: 'orders', partition: 0, partitions: 2 } },
      { streams: ['p:{orders:1}'], ordered: { pattern: 'orders', partition: 1, partitions: 2 } },
      { streams: ['p:mail'], rateLimit: { name: 'p:mail', limit: { max: 5, perMs: 1000 } } },
    ]);
  });

  it('refuses ordered where it cannot hold, naming the registration', () => {
    expect(() => planStreams([event('o', { ordered: 'yes' })], ONE_NODE)).toThrow(
      /@StreamPattern\('o'\): ordered must be true or false, got "yes"/,
    );
    expect(() => planStreams([event('o', { ordered: true, batch: { maxSize: 5 } })], ONE_NODE)).toThrow(
      /ordered and batch together are not supported/,
    );
    expect(() => planStreams([request('o', { ordered: true })], ONE_NODE)).toThrow(/ordered is for event handlers/);
    expect(() => planStreams([event('o', { ordered: true }, { ordered: false })], ONE_NODE)).toThrow(/disagree on ordered/);
  });

  it('a fair pattern: each partition a reader of its own (its fair queues read ahead), with its pattern limit if it has one', () => {
    const keyOf = (p: { tenant: string }) => p.tenant;
    const plan = planStreams(
      [
        event('a'),
        event('jobs', { fair: { inHand: 2 }, partitions: 2 }),
        event('mail', { fair: { inHand: 1, perKey: keyOf }, rateLimit: { max: 5, perMs: 1000 } }),
      ],
      ONE_NODE,
    );
    const jobs = { name: 'p:jobs', pattern: 'jobs', groups: { inHand: 2, perKey: true } };
    expect(plan.readers).toEqual([
      { streams: ['p:a'] },
      { streams: ['p:{jobs:0}'], fair: jobs },
      { streams: ['p:{jobs:1}'], fair: jobs },
      {
        streams: ['p:mail'],
        rateLimit: { name: 'p:mail', limit: { max: 5, perMs: 1000 } },
        fair: { name: 'p:mail', pattern: 'mail', groups: { inHand: 1, perKey: keyOf } },
      },
    ]);
    expect(plan.origins.get('p:{jobs:1}')).toMatchObject({ pattern: 'jobs', partition: 1, fair: { inHand: 2, perKey: true } });
  });

  it('refuses a fair option it cannot take, naming the option or the clash', () => {
    const fair =
      (value: unknown, more: Record<string, unknown> = {}) =>
      () =>
        planStreams([event('f', { fair: value, ...more })], ONE_NODE);
    for (const [value, message] of [
      [{}, /invalid option "@StreamPattern\('f'\) fair\.inHand": must be a whole number from 1 to 1000, got undefined/],
      [{ inHand: 0 }, /"@StreamPattern\('f'\) fair\.inHand": must be a whole number from 1 to 1000, got 0/],
      [{ inHand: 1.5 }, /fair\.inHand": must be a whole number from 1 to 1000, got 1\.5/],
      [{ inHand: 1001 }, /fair\.inHand": must be a whole number from 1 to 1000, got 1001/],
      [{ inHand: '2' }, /fair\.inHand": must be a whole number from 1 to 1000, got "2"/],
      [{ inHand: 2, perKey: 'tenant' }, /fair\.perKey": must be true \(the partition key\) or a function/],
      [{ inHand: 2, perkey: true }, /perkey/],
      [3, /invalid option "@StreamPattern\('f'\) fair": must be \{ inHand, perKey\? \}, got 3/],
    ] as const)
      expect(fair(value), JSON.stringify(value)).toThrow(message);
    expect(fair({ inHand: 0 })).toThrow(InvalidOptionError);
    expect(fair({ inHand: 1 }, { ordered: true })).toThrow(/fair and ordered together are not supported/);
    expect(fair({ inHand: 1 }, { batch: { maxSize: 5 } })).toThrow(/fair with batch is not supported/);
    expect(() => planStreams([request('f', { fair: { inHand: 1 } })], ONE_NODE)).toThrow(/fair is for event handlers/);
    expect(() => planStreams([event('f', {}, { fair: { inHand: 1 } })], ONE_NODE)).toThrow(/fair on one that is not the first/);
  });

  it('a pattern with priorities: its levels are streams (level 0 the key itself), one reader for them all, the highest first', () => {
    const plan = planStreams(
      [event('a'), event('jobs', { priorities: { levels: 3 } }), event('p', { priorities: { levels: 2, lowerEvery: 4 }, partitions: 2 })],
      ONE_NODE,
    );
    expect(plan.streams).toEqual([
      'p:a',
      'p:jobs',
      'p:jobs:prio:1',
      'p:jobs:prio:2',
      'p:{p:0}',
      'p:{p:0}:prio:1',
      'p:{p:1}',
      'p:{p:1}:prio:1',
    ]);
    expect(plan.readers).toEqual([
      { streams: ['p:a'] },
      {
        streams: ['p:jobs:prio:2', 'p:jobs:prio:1', 'p:jobs'],
        priorities: { highestFirst: ['p:jobs:prio:2', 'p:jobs:prio:1', 'p:jobs'], lowerEvery: 10 },
      },
      { streams: ['p:{p:0}:prio:1', 'p:{p:0}'], priorities: { highestFirst: ['p:{p:0}:prio:1', 'p:{p:0}'], lowerEvery: 4 } },
      { streams: ['p:{p:1}:prio:1', 'p:{p:1}'], priorities: { highestFirst: ['p:{p:1}:prio:1', 'p:{p:1}'], lowerEvery: 4 } },
    ]);
    expect(plan.origins.get('p:jobs:prio:2')).toMatchObject({ pattern: 'jobs', priorities: { levels: 3, level: 2, base: 'p:jobs' } });
    // A cluster: every level in its key's slot.
    const cluster = planStreams([event('jobs', { priorities: { levels: 3 } })], CLUSTER);
    expect(cluster.streams).toEqual(['p:jobs', '{p:jobs}:prio:1', '{p:jobs}:prio:2']);
    expect(new Set(cluster.streams.map(slotOf)).size).toBe(1);
    expect(cluster.readers).toHaveLength(1);
  });

  it("refuses a pattern whose key is another pattern's priority level (review finding)", () => {
    expect(() => planStreams([event('mail', { priorities: { levels: 2 } }), event('mail:prio:1')], ONE_NODE)).toThrow(
      /stream key "p:mail:prio:1" would be read by two patterns \("mail" and "mail:prio:1": one is a priority level of the other\)/,
    );
  });

  it('refuses a priorities option it cannot take, naming the option or the clash', () => {
    const prio =
      (value: unknown, more: Record<string, unknown> = {}) =>
      () =>
        planStreams([event('q', { priorities: value, ...more })], ONE_NODE);
    expect(prio({ levels: 1 })).toThrow(/"@StreamPattern\('q'\) priorities\.levels": must be a whole number from 2 to 10, got 1/);
    expect(prio({ levels: 11 })).toThrow(/priorities\.levels": must be a whole number from 2 to 10, got 11/);
    expect(prio({ levels: 3, lowerEvery: 1 })).toThrow(/priorities\.lowerEvery": must be a whole number from 2 to 1000, got 1/);
    expect(prio({ levels: 3, weights: [1] })).toThrow(/weights/);
    expect(prio(3)).toThrow(/"@StreamPattern\('q'\) priorities": must be \{ levels, lowerEvery\? \}, got 3/);
    expect(prio({ levels: 2 }, { ordered: true })).toThrow(/priorities with ordered is not supported/);
    expect(prio({ levels: 2 }, { fair: { inHand: 1 } })).toThrow(/priorities with fair is not supported yet/);
    expect(prio({ levels: 2 }, { batch: { maxSize: 5 } })).toThrow(/priorities with batch is not supported yet/);
    expect(() => planStreams([request('q', { priorities: { levels: 2 } })], ONE_NODE)).toThrow(/priorities are for event handlers/);
  });

  it('a batch handler gets a reader of its own, with its options resolved', () => {
    const plan = planStreams([event('a'), event('b', { batch: { maxSize: 5 } })], ONE_NODE);
    expect(plan.readers).toEqual([{ streams: ['p:a'] }, { streams: ['p:b'], batch: { maxSize: 5, maxWaitMs: 0 } }]);
  });

  it('a cluster: one reader per slot, at most MAX_SLOT_LANES', () => {
    const plan = planStreams([event('{x}.a'), event('{x}.b'), event('y')], CLUSTER);
    expect(plan.readers.map((r) => r.streams)).toEqual(expect.arrayContaining([['p:{x}.a', 'p:{x}.b'], ['p:y']]));
    const many = Array.from({ length: 3 }, (_, i) => event(`s${i}`, { partitions: 64 }));
    expect(() => planStreams(many, CLUSTER)).toThrow(
      new RegExp(`the 192 streams span \\d+ cluster slots, each needing its own blocking connection \\(at most ${MAX_SLOT_LANES}\\)`),
    );
  });

  it('stray keys: where a producer with another partition count writes', () => {
    const plan = planStreams([event('a'), event('orders', { partitions: 2 })], ONE_NODE);
    expect([...plan.strays]).toEqual([
      ['p:{a:0}', "@StreamPattern('a') reads the plain key"],
      ['p:orders', "@StreamPattern('orders', { partitions: 2 })"],
      ['p:{orders:2}', "@StreamPattern('orders', { partitions: 2 })"],
    ]);
  });

  it('refuses an object pattern', () => {
    expect(() => planStreams([event('{"cmd":"x"}')], ONE_NODE)).toThrow(
      /pattern \{"cmd":"x"\} must be a string \(the stream key\), not an object/,
    );
    expect(() => planStreams([event('{}')], ONE_NODE)).toThrow(/must be a string/);
    // A hash-tagged key is a string pattern.
    expect(planStreams([event('{orders}.paid')], ONE_NODE).streams).toEqual(['p:{orders}.paid']);
  });

  it('refuses a batch handler that shares its pattern, and chained handlers that disagree on partitions', () => {
    expect(() => planStreams([event('b', { batch: { maxSize: 2 } }, {})], ONE_NODE)).toThrow(
      /pattern "b" has 2 handlers, one of them a batch handler: a batch handler must be its stream's only handler/,
    );
    expect(() => planStreams([event('b', {}, { batch: { maxSize: 2 } })], ONE_NODE)).toThrow(
      /a batch handler must be its stream's only handler/,
    );
    expect(() => planStreams([event('parted', { partitions: 2 }, { partitions: 3 })], ONE_NODE)).toThrow(
      /the handlers of "parted" disagree on partitions \(2 against 3\): one stream is read one way/,
    );
  });

  it('refuses a batch request handler and bad batch options', () => {
    expect(() => planStreams([request('r', { batch: { maxSize: 2 } })], ONE_NODE)).toThrow(
      /pattern "r": a batch handler answers no request; use @StreamPattern, not @MessagePattern/,
    );
    expect(() => planStreams([event('b', { batch: {} })], ONE_NODE)).toThrow(/@StreamPattern\('b'\) batch\.maxSize/);
  });

  it("refuses an unknown @StreamPattern extra, naming the pattern and the key; a bare @EventPattern's extras may be another transport's", () => {
    const typo = () => planStreams([event('bulk', { bach: { maxSize: 500 }, [STREAM_PATTERN_EXTRAS]: true })], ONE_NODE);
    expect(typo).toThrow(InvalidOptionError);
    expect(typo).toThrow(`invalid option "@StreamPattern('bulk') bach": unknown option`);
    // Every handler of the chain, not only the first.
    expect(() => planStreams([event('o', {}, { partitons: 2, [STREAM_PATTERN_EXTRAS]: true })], ONE_NODE)).toThrow(
      `invalid option "@StreamPattern('o') partitons": unknown option`,
    );
    expect(planStreams([event('bulk', { batch: { maxSize: 5 }, [STREAM_PATTERN_EXTRAS]: true })], ONE_NODE).readers).toHaveLength(1);
    // MQTT's `qos` on a handler no transport was named for.
    expect(planStreams([event('shared', { qos: 1 })], ONE_NODE).streams).toEqual(['p:shared']);
  });

  it('refuses a bad partition count', () => {
    expect(() => planStreams([event('o', { partitions: 0 })], ONE_NODE)).toThrow(
      /@StreamPattern\('o'\): partitions must be a whole number from 1 to 64, got 0/,
    );
  });

  it('refuses, on a cluster, partitions that would share one slot', () => {
    expect(() => planStreams([event('orders', { partitions: 6 })], { ...CLUSTER, keyPrefix: '{app}:' })).toThrow(
      /keyPrefix "\{app\}:" has a hash tag: the 6 partitions of "orders" would all share one slot \(\{app\}:\{orders:0\}, …\)/,
    );
    expect(() => planStreams([event('{o}', { partitions: 2 })], CLUSTER)).toThrow(/the pattern has braces: the 2 partitions of "\{o\}"/);
    // On one node the slots do not matter.
    expect(planStreams([event('orders', { partitions: 6 })], { ...ONE_NODE, keyPrefix: '{app}:' }).streams).toHaveLength(6);
  });

  it('refuses, on a cluster, a dead-letter stream in another slot than its stream', () => {
    const elsewhere: PlanOptions = { ...CLUSTER, deadLetterStream: (s) => `dead:${s}` };
    expect(slotOf('dead:p:a')).not.toBe(slotOf('p:a'));
    expect(() => planStreams([event('a')], elsewhere)).toThrow(
      /dead-letter stream "dead:p:a" of "p:a" is in another cluster slot: the move and its XACK must be one script. Give it the stream's slot \(e\.g\. "\{p:a\}:dead"\)/,
    );
    expect(planStreams([event('a')], { ...elsewhere, deadLetterStream: false }).readers).toHaveLength(1);
  });

  it("a pattern's retry policy is resolved onto each of its keys; a bad one is refused naming the pattern; only the first chained handler may have one", () => {
    const plan = planStreams(
      [event('orders', { partitions: 2, retry: { backoff: { type: 'exponential', delayMs: 100, maxDelayMs: 300 } } }), event('a')],
      ONE_NODE,
    );
    const delay = plan.origins.get('p:{orders:1}')!.retry!;
    expect([1, 2, 3, 4].map((n) => delay(n, new Error('x')))).toEqual([100, 200, 300, 300]);
    expect(plan.origins.get('p:a')!.retry).toBeUndefined();
    expect(() => planStreams([event('orders', { retry: { backoff: { type: 'fixed' } } })], ONE_NODE)).toThrow(
      `invalid option "@StreamPattern('orders') retry.backoff.delayMs"`,
    );
    expect(() => planStreams([event('orders', {}, { retry: { backoff: { type: 'fixed', delayMs: 1 } } })], ONE_NODE)).toThrow(
      /pattern "orders" has 2 handlers and a retry policy on one that is not the first/,
    );
    expect(() => planStreams([request('quote', { retry: { backoff: { type: 'fixed', delayMs: 1 } } })], ONE_NODE)).toThrow(
      /pattern "quote": a request handler's failure is answered to its caller .* a retry policy is for event handlers/,
    );
  });

  it('no handler: no stream, no reader', () => {
    expect(planStreams([], CLUSTER)).toMatchObject({ streams: [], readers: [] });
  });
});
