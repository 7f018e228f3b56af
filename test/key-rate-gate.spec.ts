/**
 * KeyRateGate (consumer/intake): the admission of a pattern limited per key, against its interface
 * (pass, slow) on a real Redis: the grants, the turns of a waiting backlog, a key function's mistakes,
 * a RateLimitedException's slowing, and a Redis that refuses the grants script.
 */
import { randomUUID } from 'node:crypto';
import { KeyRateGate, OverKeyRateLimitError } from '../libs/redis-streams/src/consumer/intake/key-rate-gate.js';
import { NotYet } from '../libs/redis-streams/src/consumer/settle/admission.js';
import type { DecodedEntry } from '../libs/redis-streams/src/codec/entry-codec.js';
import type { RateLimit } from '../libs/redis-streams/src/options/rate-limit-options.js';
import { resolveServerOptions } from '../libs/redis-streams/src/options/server-options.js';
import { Lanes } from '../libs/redis-streams/src/redis/connection/lanes.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { aclUser } from './support/acl.js';
import { waitFor } from './support/wait-for.js';
import { rateLimitStateKeysOf } from '../libs/redis-streams/src/key-names.js';
import { MAX_HELD_KEYS } from '../libs/redis-streams/src/redis/intake/rate-limit-scripts.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const opened: Lanes[] = [];
afterEach(async () => {
  for (const lanes of opened.splice(0)) await lanes.close();
});

/** A gate of its own pattern (a fresh name in Redis), on `connection` (default: the server's URL). */
function admissionOf(limit: RateLimit, connection: unknown = redis.url, errors: string[] = [], warns: string[] = []) {
  const options = resolveServerOptions({ connection: connection as never, group: 'g', consumer: 'c', telemetry: false });
  const lanes = new Lanes({ connection: options.connection, name: `gate:${randomUUID().slice(0, 8)}`, onError: () => {} });
  opened.push(lanes);
  const commands = new StreamCommands(lanes.command, 'g');
  const pattern = `mail-${randomUUID().slice(0, 8)}`;
  const logger = { log: () => {}, warn: (m: string) => void warns.push(m), error: (m: string) => void errors.push(m) };
  const deps = { pattern, name: `t:${pattern}`, limit, limits: commands.rateLimits, consumer: 'c', logger, heldTtlMs: 30_000 };
  const gate = new KeyRateGate(deps);
  depsOf.set(gate, deps);
  return gate;
}
/** What each gate was built with: a second gate of the same pattern is another worker's. */
const depsOf = new WeakMap<KeyRateGate, ConstructorParameters<typeof KeyRateGate>[0]>();

let seq = 0;
/** An entry of key `key` (its partition key field), decoded with `payload`. */
function entry(key?: string, payload: unknown = {}): [StreamEntry, DecodedEntry] {
  const fields = ['data', JSON.stringify(payload), ...(key === undefined ? [] : ['partitionKey', key])];
  const e = { stream: 's', id: `1-${++seq}`, fields, deliveryCount: 1 } as StreamEntry;
  return [e, { payload, headers: {} } as DecodedEntry];
}

const passOf = (gate: KeyRateGate, [e, d]: [StreamEntry, DecodedEntry]) => gate.pass(e, d);

describe('KeyRateGate: a pattern limited per key, at each entry start', () => {
  it("the key's grants, then a NotYet (uncounted, named for the metrics) until its window frees one; other keys are not held", async () => {
    const gate = admissionOf({ max: 2, perMs: 60_000, perKey: true });
    expect(await passOf(gate, entry('a'))).toBeUndefined();
    expect(await passOf(gate, entry('a'))).toBeUndefined();
    const held = await passOf(gate, entry('a'));
    expect(held).toBeInstanceOf(NotYet);
    expect(held).toBeInstanceOf(OverKeyRateLimitError);
    expect(held!.name).toBe('OverKeyRateLimitError');
    expect(held!.rateLimited).toBe(true);
    expect(held!.retryInMs).toBeGreaterThan(50_000);
    // Until the window frees the oldest grant, 1 ms past it (60,001 when asked in the ms of the oldest grant).
    expect(held!.retryInMs).toBeLessThanOrEqual(60_001);
    expect(held!.message).toBe('over the rate limit of its key (2 per 60000 ms)');
    expect(await passOf(gate, entry('b'))).toBeUndefined();
  });

  it('a backlog of one key waits a window per max of those ahead; one back from its wait goes first', async () => {
    const gate = admissionOf({ max: 1, perMs: 10_000, perKey: true });
    expect(await passOf(gate, entry('k'))).toBeUndefined();
    const waiting = [entry('k'), entry('k'), entry('k')];
    const waits = [];
    for (const e of waiting) waits.push((await passOf(gate, e))!.retryInMs);
    // Each one window further than the one before it (the grant's own wait, then +10 s per entry ahead).
    expect(waits[1]! - waits[0]!).toBeGreaterThan(9_000);
    expect(waits[2]! - waits[1]!).toBeGreaterThan(9_000);
    // The first, back early and refused again: ahead of the other two, at the next free grant.
    expect((await passOf(gate, waiting[0]!))!.retryInMs).toBeLessThanOrEqual(10_001);
  });

  it('an entry without a key passes at once, with no command; a key function that throws or returns what is no key throws', async () => {
    const byPartition = admissionOf({ max: 1, perMs: 60_000, perKey: true });
    expect(passOf(byPartition, entry())).toBeUndefined();
    expect(passOf(byPartition, entry())).toBeUndefined();
    const byTenant = admissionOf({ max: 1, perMs: 60_000, perKey: (p) => (p as { tenant?: unknown }).tenant as string });
    expect(passOf(byTenant, entry(undefined, { tenant: null }))).toBeUndefined();
    expect(await passOf(byTenant, entry(undefined, { tenant: 7 }))).toBeUndefined();
    expect(await passOf(byTenant, entry(undefined, { tenant: '7' }))).toBeInstanceOf(NotYet);
    expect(() => passOf(byTenant, entry(undefined, { tenant: { id: 1 } }))).toThrow(
      /rateLimit.perKey returned object: a key is a string or a finite number/,
    );
    expect(() => passOf(byTenant, entry(undefined, { tenant: Number.NaN }))).toThrow(/rateLimit.perKey returned NaN/);
    const throwing = admissionOf({
      max: 1,
      perMs: 60_000,
      perKey: () => {
        throw new Error('no tenant');
      },
    });
    expect(() => passOf(throwing, entry())).toThrow(/rateLimit.perKey threw: Error: no tenant \(the handler did not run\)/);
  });

  it("slow() names the entry's key and slows it in every worker of the group; an entry it never saw slows nothing", async () => {
    const limit = { max: 100, perMs: 60_000, perKey: true as const };
    const gate = admissionOf(limit);
    const seen = entry('hot');
    expect(await passOf(gate, seen)).toBeUndefined();
    expect(gate.slow(entry('hot')[0], 5_000)).toBeUndefined();
    const slowing = gate.slow(seen[0], 30_000)!;
    expect(slowing.what).toBe(`key "hot" of "${depsOf.get(gate)!.pattern}"`);
    await slowing.slowed;
    // The same pattern's name on another connection (another worker): its key is held there too, not another key.
    const peer = new KeyRateGate({ ...depsOf.get(gate)! });
    const held = await passOf(peer, entry('hot'));
    expect(held).toBeInstanceOf(NotYet);
    expect(held!.retryInMs).toBeGreaterThan(20_000);
    expect(await passOf(peer, entry('cold'))).toBeUndefined();
  });

  it("a worker whose rights cover only its keyrate keys still gets its grants and refusals: the dashboard's held set is best-effort (review finding)", async () => {
    const name = `gate-${randomUUID().slice(0, 8)}`;
    // The rights the per-key limit needed before the held set existed: none on the pattern's :rate* keys.
    const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~t:*:keyrate*', '+@all']);
    const errors: string[] = [];
    const gate = admissionOf({ max: 1, perMs: 60_000, perKey: true }, user, errors);
    expect(await passOf(gate, entry('k'))).toBeUndefined();
    const held = await passOf(gate, entry('k'));
    expect(held).toBeInstanceOf(NotYet);
    expect(held!.retryInMs).toBeGreaterThan(1_000);
    expect(errors).toEqual([]);
  });

  it('a full held set a worker may not trim (no +zremrangebyrank): nothing added past its cap, the rights named once, grants unaffected (review finding)', async () => {
    const name = `gate-${randomUUID().slice(0, 8)}`;
    const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~*', '+@all', '-zremrangebyrank']);
    const warns: string[] = [];
    const gate = admissionOf({ max: 1, perMs: 60_000, perKey: true }, user, [], warns);
    const held = rateLimitStateKeysOf(depsOf.get(gate)!.name, 'g', false).held;
    // Full: 1,000 keys held for an hour (on Redis' clock, as the workers write them).
    const [sec] = await redis.client().time();
    const full = redis.client().multi();
    for (let i = 0; i < MAX_HELD_KEYS; i++) full.zadd(held, Number(sec) * 1000 + 3_600_000, `other-${i}`);
    await full.exec();
    for (let i = 0; i < 3; i++) {
      expect(await passOf(gate, entry(`k${i}`))).toBeUndefined();
      expect(await passOf(gate, entry(`k${i}`))).toBeInstanceOf(NotYet);
    }
    await waitFor(() => warns.length > 0, { message: 'the missing right said' });
    expect(await redis.client().zcard(held)).toBe(MAX_HELD_KEYS);
    expect(warns).toEqual([expect.stringMatching(/could not record the keys held back .*\+zremrangebyrank/)]);
  });

  it('a Redis that refuses the grants script: a NotYet within 100 ms to 5 s, the rights named once, and a Redis failure rejects', async () => {
    const name = `gate-${randomUUID().slice(0, 8)}`;
    const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~*', '&*', '+@all', '-zcard']);
    const errors: string[] = [];
    const gate = admissionOf({ max: 5, perMs: 50, perKey: true }, user, errors);
    for (let i = 0; i < 3; i++) {
      const held = await passOf(gate, entry(`k${i}`));
      expect(held).toBeInstanceOf(NotYet);
      expect(held!.retryInMs).toBe(100);
      expect(held!.message).toMatch(/could not take a grant of its key's rate limit/);
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/could not take a grant of the rate limit of key "k0" .*: (ERR|NOPERM) .*\+zadd .*~t:.*:keyrate\*/);
    // Redis failing, not refusing (the connection gone): the loop's way, a rejection.
    await opened.at(-1)!.close();
    await expect(passOf(gate, entry('k9'))).rejects.toThrow(/closed/i);
  });
});
