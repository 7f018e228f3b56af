import { LUA_NOW } from '../lua/lua-now.js';

/**
 * Takes up to ARGV[3] grants of a pattern's limit for its group: a sliding window on Redis' clock,
 * the grants of the last ARGV[2] ms as members of a sorted set (score: when), at most ARGV[1] of
 * them; none while the block key lives (a handler's RateLimitedException). Members are ARGV[4]
 * followed by 1…n, unique to the call (a refund names them).
 * KEYS[1] window, KEYS[2] block. Returns {grants, ms until one may be granted (0 when some were)}.
 */
export const ACQUIRE_SCRIPT = `${LUA_NOW}
local blocked = redis.call('PTTL', KEYS[2])
if blocked > 0 then return {0, blocked} end
local max, perMs, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
-- A grant counts for perMs ms after it, both ends in: any window of perMs ms holds at most max.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - perMs))
local n = math.min(want, max - redis.call('ZCARD', KEYS[1]))
if n <= 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(oldest[2]) + perMs + 1 - now)}
end
for i = 1, n do redis.call('ZADD', KEYS[1], now, ARGV[4] .. i) end
redis.call('PEXPIRE', KEYS[1], perMs)
return {n, 0}
`;

/** Slows a pattern for ARGV[1] ms (a downstream's 429): the block lives that long, or longer if it already did. KEYS[1] block. */
export const BLOCK_SCRIPT = `
local ms = tonumber(ARGV[1])
if ms >= 1 and redis.call('PTTL', KEYS[1]) < ms then redis.call('SET', KEYS[1], ARGV[2], 'PX', ms) end
return 1
`;
