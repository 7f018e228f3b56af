import { heldKeyMemberOf, keyRateLimitKeysOf, rateLimitKeysOf, rateLimitStateKeysOf, type RateLimitKeys } from '../../key-names.js';
import type { RateLimit } from '../../options/rate-limit-options.js';
import type { RedisConnection } from '../connection/connect.js';
import { parseAcquireReply, type Acquired } from '../replies/replies.js';
import { ACQUIRE_SCRIPT, BLOCK_SCRIPT, PUBLISH_LIMIT_SCRIPT, RECORD_HELD_SCRIPT } from './rate-limit-scripts.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';

const RATE_LIMIT_SCRIPTS: readonly LuaScript[] = [
  luaScript('streamsAcquire', 2, ACQUIRE_SCRIPT),
  luaScript('streamsBlock', 1, BLOCK_SCRIPT),
  luaScript('streamsRecordHeld', 1, RECORD_HELD_SCRIPT),
  luaScript('streamsPublishLimit', 2, PUBLISH_LIMIT_SCRIPT),
];

type RateConnection = RedisConnection & {
  streamsAcquire(window: string, block: string, max: number, perMs: number, want: number, prefix: string): Promise<unknown>;
  streamsBlock(block: string, ms: number, by: string): Promise<unknown>;
  streamsRecordHeld(held: string, waitMs: number, heldKey: string, heldTtlMs: number): Promise<unknown>;
  streamsPublishLimit(record: string, held: string, max: number, perMs: number, perKey: string, ttlMs: number): Promise<unknown>;
};

/** Rate limits' commands (rate-limit-scripts.ts); replies parsed in replies.ts. */
export class RateLimitCommands {
  private readonly conn: RateConnection;

  constructor(
    conn: RedisConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {
    defineLuaScripts(conn, RATE_LIMIT_SCRIPTS);
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

  /**
   * One grant of `key`'s own limit of `name` (member `member`), or none and how long until one may be; a
   * refusal is recorded in the pattern's held set for the dashboard (expiring `heldTtlMs` after the last one), sent
   * behind the grant and not waited for: a worker without rights on it loses only the dashboard's list (`heldFailed`).
   */
  async acquireKey(
    name: string,
    key: string,
    max: number,
    perMs: number,
    member: string,
    heldTtlMs: number,
    heldFailed: (err: unknown) => void = () => undefined,
  ): Promise<Acquired> {
    const k = keyRateLimitKeysOf(name, this.group, key, this.onCluster);
    const got = parseAcquireReply(await this.conn.streamsAcquire(k.window, k.block, max, perMs, 1, member));
    if (got.grants === 0) {
      const held = rateLimitStateKeysOf(name, this.group, this.onCluster).held;
      this.conn.streamsRecordHeld(held, got.waitMs, heldKeyMemberOf(key), heldTtlMs).catch(heldFailed);
    }
    return got;
  }

  /** Writes `name`'s limit for the dashboard, expiring in `ttlMs` unless written again (and renews its held set's expiry). */
  async publish(name: string, limit: RateLimit, ttlMs: number): Promise<void> {
    const k = rateLimitStateKeysOf(name, this.group, this.onCluster);
    await this.conn.streamsPublishLimit(k.record, k.held, limit.max, limit.perMs, limit.perKey ? '1' : '0', ttlMs);
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
