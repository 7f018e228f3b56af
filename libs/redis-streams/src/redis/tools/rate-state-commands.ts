import { rateLimitKeysOf, rateLimitStateKeysOf } from '../../key-names.js';
import type { RedisConnection } from '../connection/connect.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';
import { parseRateLimitState, type RateLimitState } from './rate-state-replies.js';
import { RATE_STATE_SCRIPT } from './rate-state-scripts.js';

const RATE_STATE_SCRIPTS: readonly LuaScript[] = [luaScript('streamsRateState', 4, RATE_STATE_SCRIPT)];

type Scripted = RedisConnection & {
  streamsRateState(record: string, window: string, block: string, held: string, top: number, maxBytes: number): Promise<unknown>;
};

/** Held keys a read returns at most, and the bytes of their names. */
export const MAX_HELD_SHOWN = 50;
export const MAX_HELD_BYTES = 20_000;

/** What the dashboard reads of a pattern's rate limit (RATE_STATE_SCRIPT: read-only, bounded). */
export class RateStateCommands {
  private readonly redis: Scripted;

  constructor(
    redis: RedisConnection,
    private readonly onCluster: boolean,
  ) {
    defineLuaScripts(redis, RATE_STATE_SCRIPTS);
    this.redis = redis as Scripted;
  }

  /** The limit of `name` (keyPrefix + pattern) for `group` and its state now; null when no worker publishes one. */
  async state(name: string, group: string): Promise<RateLimitState | null> {
    const { window, block } = rateLimitKeysOf(name, group, this.onCluster);
    const { record, held } = rateLimitStateKeysOf(name, group, this.onCluster);
    return parseRateLimitState(await this.redis.streamsRateState(record, window, block, held, MAX_HELD_SHOWN, MAX_HELD_BYTES));
  }
}
