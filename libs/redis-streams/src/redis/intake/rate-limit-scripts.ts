import { LUA_NOW } from '../lua/lua-now.js';

/**
 * Takes up to ARGV[3] grants of a pattern's limit for its group: a sliding window on Redis' clock,
 * the grants of the last ARGV[2] ms as members of a sorted set (score: when), at most ARGV[1] of
 * them; none while the block key lives (a handler's RateLimitedException). Members are ARGV[4]
 * followed by 1…n, unique to the call (a refund names them).
 * KEYS[1] window, KEYS[2] block. Returns {grants, ms until one may be granted (0 when some were)}.
 * `refused(wait)`: what a refusal also does (KEY_ACQUIRE_SCRIPT's record); a grant does nothing more.
 */
const acquireScript = (refused: string): string => `${LUA_NOW}
local function refuse(wait)
  ${refused}
  return {0, wait}
end
local blocked = redis.call('PTTL', KEYS[2])
if blocked > 0 then return refuse(blocked) end
local max, perMs, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
-- A grant counts for perMs ms after it, both ends in: any window of perMs ms holds at most max.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - perMs))
local n = math.min(want, max - redis.call('ZCARD', KEYS[1]))
if n <= 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return refuse(math.max(1, tonumber(oldest[2]) + perMs + 1 - now))
end
for i = 1, n do redis.call('ZADD', KEYS[1], now, ARGV[4] .. i) end
redis.call('PEXPIRE', KEYS[1], perMs)
return {n, 0}
`;

export const ACQUIRE_SCRIPT = acquireScript('');

/** Most keys the held set keeps (the ones held longest): its members are bounded names (heldKeyMemberOf), so its bytes are too. */
export const MAX_HELD_KEYS = 1000;

/**
 * ACQUIRE_SCRIPT for one key's limit (`perKey`), a refusal also recorded for the dashboard: KEYS[3] the
 * pattern's held set (key ARGV[5] → until when, Redis ms). A key refused again costs that one ZADD; a key new
 * to the set also cuts it to its MAX_HELD_KEYS held longest and sets its expiry to ARGV[6] ms (the workers'
 * upkeep renews it while they run the limit, so a set no worker writes any more goes).
 */
export const KEY_ACQUIRE_SCRIPT = acquireScript(`if redis.call('ZADD', KEYS[3], now + wait, ARGV[5]) == 1 then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -${MAX_HELD_KEYS + 1})
    redis.call('PEXPIRE', KEYS[3], ARGV[6])
  end`);

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
