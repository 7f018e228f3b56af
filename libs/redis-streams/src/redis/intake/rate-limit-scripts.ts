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

/** Most keys the held set keeps (the ones held longest): its members are bounded names (heldKeyMemberOf), so its bytes are too. */
export const MAX_HELD_KEYS = 1000;

/**
 * A key refused by its own limit (`perKey`), recorded for the dashboard: KEYS[1] the pattern's held set, key ARGV[2]
 * → until when (Redis' clock + ARGV[1] ms), its expiry ARGV[3] ms (the workers' upkeep renews it while they run the
 * limit, so a set no worker writes any more goes). Keys no longer held go first, then, when full, those held
 * shortest: it never holds more than MAX_HELD_KEYS. Every step that may be refused (a right the worker lacks) runs
 * before the write and answers the refusal: nothing is written past the bound. A call of its own, not part of the
 * grant: a worker whose rights cover only its keyrate keys is refused this, never its grants.
 */
export const RECORD_HELD_SCRIPT = `${LUA_NOW}
local function refused(reply) return type(reply) == 'table' and reply.err ~= nil end
local r = redis.pcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if refused(r) then return r end
local n = redis.pcall('ZCARD', KEYS[1])
if refused(n) then return n end
if n >= ${MAX_HELD_KEYS} then
  r = redis.pcall('ZREMRANGEBYRANK', KEYS[1], 0, n - ${MAX_HELD_KEYS})
  if refused(r) then return r end
end
r = redis.pcall('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
if refused(r) then return r end
redis.pcall('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

/**
 * What a pattern's workers say of its limit for a group, renewed at the lease's cadence so that a limit no
 * worker runs any more disappears ARGV[4] ms after the last: KEYS[1] the record (max ARGV[1], perMs ARGV[2],
 * perKey ARGV[3]), KEYS[2] the held set (its expiry renewed, if it exists).
 */
export const PUBLISH_LIMIT_SCRIPT = `
redis.call('HSET', KEYS[1], 'max', ARGV[1], 'perMs', ARGV[2], 'perKey', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
`;

/** Slows a pattern for ARGV[1] ms (a downstream's 429): the block lives that long, or longer if it already did. KEYS[1] block. */
export const BLOCK_SCRIPT = `
local ms = tonumber(ARGV[1])
if ms >= 1 and redis.call('PTTL', KEYS[1]) < ms then redis.call('SET', KEYS[1], ARGV[2], 'PX', ms) end
return 1
`;
