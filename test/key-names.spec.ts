import { describe, expect, it } from 'vitest';
import {
  cleanupLockOf,
  deadLetterKeyOf,
  deadLetterNamesOf,
  deadLetterSourcesOf,
  delayedKeysOf,
  derivedKey,
  escapePart,
  fairSlotKeyOf,
  idempotencyKeyOf,
  idempotencyKeyPrefixOf,
  isOwnIdempotencyKey,
  KEY_KINDS,
  keyRateLimitKeysOf,
  ownershipKeysOf,
  pauseKeyOf,
  pruneLockOf,
  rateLimitKeysOf,
  rateLimitStateKeysOf,
  retryKeyOf,
  scheduleKeysOf,
} from '../libs/redis-streams/src/key-names.js';
import { slotOf } from '../libs/redis-streams/src/slots.js';

/** Every kind of key derived from a user's name: its arity (user-supplied parts after the name), and the key. */
const KINDS: Record<string, { arity: number; key: (name: string, args: string[], onCluster: boolean) => string }> = {
  dead: { arity: 0, key: (s, _, c) => deadLetterKeyOf(s, c) },
  delayed: { arity: 0, key: (s, _, c) => delayedKeysOf(s, c).schedule },
  'delayed:entries': { arity: 0, key: (s, _, c) => delayedKeysOf(s, c).entries },
  'delayed:schedules': { arity: 0, key: (s, _, c) => scheduleKeysOf(s, c).records },
  'delayed:schedules:next': { arity: 0, key: (s, _, c) => scheduleKeysOf(s, c).next },
  'delayed:schedules:fired': { arity: 0, key: (s, _, c) => scheduleKeysOf(s, c).fired },
  retry: { arity: 1, key: (s, [g], c) => retryKeyOf(s, g!, c) },
  owner: { arity: 1, key: (s, [g], c) => ownershipKeysOf(s, g!, c).owner },
  members: { arity: 1, key: (s, [g], c) => ownershipKeysOf(s, g!, c).members },
  epoch: { arity: 1, key: (s, [g], c) => ownershipKeysOf(s, g!, c).epoch },
  durability: { arity: 1, key: (s, [g], c) => ownershipKeysOf(s, g!, c).durability },
  cleanup: { arity: 1, key: (s, [g], c) => cleanupLockOf(s, g!, c) },
  prune: { arity: 1, key: (s, [t], c) => pruneLockOf(s, t!, c) },
  paused: { arity: 1, key: (s, [g]) => pauseKeyOf(s, g!) },
  rate: { arity: 1, key: (n, [g], c) => rateLimitKeysOf(n, g!, c).window },
  ratelimited: { arity: 1, key: (n, [g], c) => rateLimitKeysOf(n, g!, c).block },
  'rate:limit': { arity: 1, key: (n, [g], c) => rateLimitStateKeysOf(n, g!, c).record },
  'rate:held': { arity: 1, key: (n, [g], c) => rateLimitStateKeysOf(n, g!, c).held },
  keyrate: { arity: 2, key: (n, [g, k], c) => keyRateLimitKeysOf(n, g!, k!, c).window },
  keyratelimited: { arity: 2, key: (n, [g, k], c) => keyRateLimitKeysOf(n, g!, k!, c).block },
  idmp: { arity: 2, key: (s, [p, k], c) => idempotencyKeyOf(s, p!, k!, c) },
  prio: { arity: 1, key: (s, [l], c) => derivedKey('prio', s, [l!], c) },
  inhand: { arity: 2, key: (n, [g, k], c) => fairSlotKeyOf(n, g!, k!, c) },
};

/** Names meant to break a key scheme: separators, braces, the escape character, empty parts, kind words, unicode. */
const NAMES = [
  'orders',
  'orders:retry',
  'orders:delayed',
  'orders:delayed:schedules',
  'orders:delayed:schedules:next',
  'orders:dead',
  // Its idempotency keys begin with `orders`' prefix `orders:idmp:`: a record of `orders` must not take them.
  'orders:idmp:p',
  'a',
  'a:retry:b',
  'a:keyrate',
  'a:rate:limit',
  'a:rate:held',
  'a:rate',
  'jobs:tenant',
  'jobs:{tenant:1}',
  'jobs:{tenant:2}',
  '{orders}',
  'orders:0',
  '{orders:0}',
  'app:{orders:0}',
  'jobs:42',
  '{jobs:42}',
  '{x}:dead',
  'a{b',
  '{a',
  'x{}y',
  'a}b',
  '',
  ':',
  '%',
  '%3A',
  'delayed',
  'é',
  '日本:{語}',
  '🎉',
];
const PARTS = [
  'g',
  '',
  ':',
  'b:retry:c',
  'c',
  'delayed',
  'dead',
  'retry',
  'entries',
  'keyrate',
  'rate',
  'limit',
  'held',
  'limit:g',
  'inhand',
  'prio',
  '{g}',
  '}',
  '%',
  '%3A',
  'x:dead',
  '0',
  '7',
  'é',
  '🎉',
];

/** Names whose braces allow no tag: on a cluster each of their keys is a slot search (about 16,000 hashes), so fewer parts. */
const SEARCHED = new Set(['a}b', 'x{}y', '']);
const FEW = ['g', 'dead'];

function allKeys(onCluster: boolean): Map<string, string> {
  const seen = new Map<string, string>();
  const collisions: string[] = [];
  for (const [kind, { arity, key }] of Object.entries(KINDS)) {
    const argsOf = (parts: string[]): string[][] =>
      arity === 0 ? [[]] : arity === 1 ? parts.map((p) => [p]) : parts.flatMap((a) => parts.map((b) => [a, b]));
    for (const name of NAMES) {
      for (const args of argsOf(onCluster && SEARCHED.has(name) ? FEW : PARTS)) {
        const tuple = JSON.stringify([kind, name, ...args]);
        const k = key(name, args, onCluster);
        if (onCluster && kind !== 'paused' && slotOf(k) !== slotOf(name))
          collisions.push(`${tuple} → ${JSON.stringify(k)}: not in its slot`);
        const other = seen.get(k);
        if (other !== undefined && other !== tuple) collisions.push(`${other} and ${tuple} → ${JSON.stringify(k)}`);
        else seen.set(k, tuple);
      }
    }
  }
  expect(collisions.slice(0, 12), `${collisions.length} collisions`).toEqual([]);
  return seen;
}

/** A delayed entry's record names its idempotency key: a worker takes it only if it is one of its own stream's, never another key. */
function onlyOwnIdempotencyKeys(keys: Map<string, string>, onCluster: boolean): void {
  const wrong: string[] = [];
  const prefixes = NAMES.map((name) => [name, idempotencyKeyPrefixOf(name, onCluster)] as const);
  for (const [key, tuple] of keys) {
    const [kind, name] = JSON.parse(tuple) as string[];
    for (const [other, prefix] of prefixes) {
      const own = kind === 'idmp' && name === other;
      if (isOwnIdempotencyKey(prefix, key) !== own) wrong.push(`${tuple} under the prefix of ${JSON.stringify(other)}: ${!own}`);
    }
  }
  expect(wrong.slice(0, 12), `${wrong.length} wrong`).toEqual([]);
}

describe('keys derived from user names are injective', () => {
  it('on one node: no two (kind, name, group, extra) give one key; a stream takes only its own idempotency keys', () => {
    onlyOwnIdempotencyKeys(allKeys(false), false);
  });

  it('on a cluster: no two give one key, and each is in its name’s slot; a stream takes only its own idempotency keys', () => {
    onlyOwnIdempotencyKeys(allKeys(true), true);
  });
});

describe('the names deployments already have', () => {
  it('keep today’s keys for names without `:`, `{`, `}`, `%` in their parts, and for the common cluster names', () => {
    expect(retryKeyOf('orders', 'billing', false)).toBe('orders:retry:billing');
    expect(retryKeyOf('orders', 'billing', true)).toBe('{orders}:retry:billing');
    expect(retryKeyOf('app:{orders:3}', 'billing', true)).toBe('app:{orders:3}:retry:billing');
    expect(ownershipKeysOf('{orders:0}', 'g', true)).toEqual({
      owner: '{orders:0}:owner:g',
      members: '{orders:0}:members:g',
      epoch: '{orders:0}:epoch:g',
      durability: '{orders:0}:durability:g',
    });
    expect(deadLetterKeyOf('orders', false)).toBe('orders:dead');
    expect(deadLetterKeyOf('orders', true)).toBe('{orders}:dead');
    expect(delayedKeysOf('app:orders', true)).toEqual({ schedule: '{app:orders}:delayed', entries: '{app:orders}:delayed:entries' });
    expect(pauseKeyOf('app:orders', 'g')).toBe('app:orders:paused:g');
    expect(rateLimitKeysOf('app:mail', 'g', false)).toEqual({ window: 'app:mail:rate:g', block: 'app:mail:ratelimited:g' });
    expect(keyRateLimitKeysOf('app:mail', 'g', 'tenant-7', false).window).toBe('app:mail:keyrate:g:tenant-7');
    expect(idempotencyKeyOf('orders', 'nestjs-redis-streams', 'order-1', false)).toBe('orders:idmp:nestjs-redis-streams:order-1');
    expect(cleanupLockOf('orders', 'g', false)).toBe('orders:cleanup:g');
  });

  it('escapes what would make a key ambiguous, and only that', () => {
    expect(escapePart('b:retry:c')).toBe('b%3Aretry%3Ac');
    expect(escapePart('{tenant}%')).toBe('%7Btenant%7D%25');
    expect(escapePart('dead')).toBe('%64ead');
    expect(escapePart('dead ')).toBe('dead ');
    expect(escapePart('entries')).toBe('entries');
    expect(escapePart('é 🎉')).toBe('é 🎉');
    expect(retryKeyOf('a', 'b:retry:c', false)).toBe('a:retry:b%3Aretry%3Ac');
    // The two names a cluster's `{X}` could mean: the library's partition keeps it, a plain `jobs:42` writes `/`.
    expect(retryKeyOf('jobs:42', 'g', true)).toBe('{jobs:42}/retry:g');
    expect(retryKeyOf('{jobs:42}', 'g', true)).toBe('{jobs:42}:retry:g');
    expect(retryKeyOf('{orders}', 'g', true)).toBe('{orders}/retry:g');
    expect(derivedKey('retry', 'a}b', ['g'], true)).toMatch(/^a\}b:retry:g:\d+$/);
    expect(keyRateLimitKeysOf('m', 'g', 'x'.repeat(201), false).window).toMatch(/^m:keyrate:g:%#[0-9a-f]{32}$/);
    expect(keyRateLimitKeysOf('m', 'g', '\uD800', false).window).not.toBe(keyRateLimitKeysOf('m', 'g', '\uFFFD', false).window);
    expect(() => derivedKey('retry', 'orders', [], false)).toThrow(/takes 1 parts/);
    // The limit's record and held keys live under the word `rate`: no part that was written as it is changes.
    expect(escapePart('limit')).toBe('limit');
    expect(escapePart('held')).toBe('held');
    expect(rateLimitStateKeysOf('app:mail', 'billing', false)).toEqual({
      record: 'app:mail:rate:limit:billing',
      held: 'app:mail:rate:held:billing',
    });
    expect(rateLimitStateKeysOf('app:mail', 'billing', true).held).toBe('{app:mail}:rate:held:billing');
    expect(Object.keys(KEY_KINDS)).toHaveLength(23);
  });

  it('a dead-letter stream names its source from its key alone, on one node and on a cluster', () => {
    for (const stream of NAMES.filter((n) => n !== '')) {
      for (const dead of deadLetterNamesOf(stream)) expect(deadLetterSourcesOf(dead), dead).toContain(stream);
    }
    expect(deadLetterSourcesOf('orders:dead')).toEqual(['orders']);
    expect(deadLetterSourcesOf('{orders}:dead').sort()).toEqual(['orders', '{orders}']);
    expect(deadLetterSourcesOf('{jobs:42}/dead')).toEqual(['jobs:42']);
    expect(deadLetterSourcesOf('orders')).toEqual([]);
    expect(deadLetterSourcesOf(':dead')).toEqual([]);
  });
});
