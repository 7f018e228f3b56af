import { createHash } from 'node:crypto';
import { sameSlotKey } from '../slots.js';
import type { RedisConnection } from './connect.js';
import { parseAcquireReply, type Acquired } from './replies.js';
import { ACQUIRE_SCRIPT, BLOCK_SCRIPT } from './rate-limit-scripts.js';

/** A pattern's limit for one group: its window of grants, and the block a handler's RateLimitedException sets. */
export interface RateLimitKeys {
  window: string;
  block: string;
}

/** `<name>:rate:<group>` and `<name>:ratelimited:<group>` (`name`: keyPrefix + pattern); on a cluster in one slot (`{name}:rate:…`). */
export function rateLimitKeysOf(name: string, group: string, onCluster: boolean): RateLimitKeys {
  const key = (suffix: string) => (onCluster ? sameSlotKey(name, suffix) : `${name}${suffix}`);
  return { window: key(`:rate:${group}`), block: key(`:ratelimited:${group}`) };
}

/** Most characters of a key kept in its Redis key names: a longer one is named by its hash. */
const MAX_KEY_CHARS = 200;

/**
 * One key's limit of a pattern (`rateLimit.perKey`): `<name>:keyrate:<group>:<key>` and
 * `<name>:keyratelimited:<group>:<key>`, the key URI-encoded (no `:` or brace of its own), or
 * `#<sha-256>` when longer than MAX_KEY_CHARS or not encodable (a lone surrogate); on a cluster in
 * the pattern's slot, as its limit.
 */
export function keyRateLimitKeysOf(name: string, group: string, key: string, onCluster: boolean): RateLimitKeys {
  let part: string | undefined;
  try {
    part = encodeURIComponent(key);
  } catch {
    // A lone surrogate: hashed as the UTF-16 it is, so that no two keys share a name.
  }
  if (part === undefined || part.length > MAX_KEY_CHARS)
    part = `#${createHash('sha256').update(Buffer.from(key, 'utf16le')).digest('hex').slice(0, 32)}`;
  const named = (suffix: string) => (onCluster ? sameSlotKey(name, suffix) : `${name}${suffix}`);
  // `keyrate`, not the pattern's `rate`: no group name makes one the other's (the encoded key has no `:`).
  return { window: named(`:keyrate:${group}:${part}`), block: named(`:keyratelimited:${group}:${part}`) };
}

type RateConnection = RedisConnection & {
  streamsAcquire(window: string, block: string, max: number, perMs: number, want: number, prefix: string): Promise<unknown>;
  streamsBlock(block: string, ms: number, by: string): Promise<unknown>;
};

/** Rate limits' commands (rate-limit-scripts.ts); replies parsed in replies.ts. */
export class RateLimitCommands {
  private readonly conn: RateConnection;

  constructor(
    conn: RedisConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {
    conn.defineCommand('streamsAcquire', { numberOfKeys: 2, lua: ACQUIRE_SCRIPT });
    conn.defineCommand('streamsBlock', { numberOfKeys: 1, lua: BLOCK_SCRIPT });
    this.conn = conn as RateConnection;
  }

  keys(name: string): RateLimitKeys {
    return rateLimitKeysOf(name, this.group, this.onCluster);
  }

  /** Up to `want` grants of `name`'s limit (members `prefix`1…n), or none and how long until one may be. */
  async acquire(name: string, max: number, perMs: number, want: number, prefix: string): Promise<Acquired> {
    const k = this.keys(name);
    return parseAcquireReply(await this.conn.streamsAcquire(k.window, k.block, max, perMs, want, prefix));
  }

  /** One grant of `key`'s own limit of `name` (member `member`), or none and how long until one may be. */
  async acquireKey(name: string, key: string, max: number, perMs: number, member: string): Promise<Acquired> {
    const k = keyRateLimitKeysOf(name, this.group, key, this.onCluster);
    return parseAcquireReply(await this.conn.streamsAcquire(k.window, k.block, max, perMs, 1, member));
  }

  /** No grant of `key`'s limit of `name` for `ms` (or longer, if a block already lasts longer). */
  async blockKey(name: string, key: string, ms: number, by: string): Promise<void> {
    await this.conn.streamsBlock(keyRateLimitKeysOf(name, this.group, key, this.onCluster).block, ms, by);
  }

  /** Gives back grants that read nothing (members `prefix`(from+1)…`prefix`n). */
  async refund(name: string, prefix: string, from: number, n: number): Promise<void> {
    if (from >= n) return;
    const members = Array.from({ length: n - from }, (_, i) => `${prefix}${from + i + 1}`);
    await this.conn.zrem(this.keys(name).window, ...members);
  }

  /** No grant of `name` for `ms` (or longer, if a block already lasts longer). */
  async block(name: string, ms: number, by: string): Promise<void> {
    await this.conn.streamsBlock(this.keys(name).block, ms, by);
  }
}
