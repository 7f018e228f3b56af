import { LUA_NOW } from '../lua/lua-now.js';

/**
 * A pattern's rate limit for one group as the dashboard shows it, read-only: the limit its workers published
 * (KEYS[1], a hash; {} when none does), the grants of the current window (KEYS[2]: those of the last perMs ms,
 * as the grants script counts them), the block (KEYS[3]: ms left and who set it) and, for a per-key limit, the
 * keys held back now (KEYS[4]: until after now), the ARGV[1] held longest, stopping past ARGV[2] bytes of names,
 * and how many there are. Every key is checked for its type: a key of another type reads as absent.
 */
export const RATE_STATE_SCRIPT = `${LUA_NOW}
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return {} end
-- Read only once short (a forged value of megabytes is never copied), and only whole numbers the options allow.
for _, f in ipairs({'max', 'perMs', 'perKey'}) do
  if redis.call('HSTRLEN', KEYS[1], f) > 16 then return {} end
end
local rec = redis.call('HMGET', KEYS[1], 'max', 'perMs', 'perKey')
local function whole(v)
  if not v or not string.match(v, '^[1-9][0-9]*$') then return nil end
  return tonumber(v)
end
local max, perMs = whole(rec[1]), whole(rec[2])
if not max or not perMs then return {} end
local ttl = redis.call('PTTL', KEYS[1])
local used = 0
if redis.call('TYPE', KEYS[2]).ok == 'zset' then used = redis.call('ZCOUNT', KEYS[2], now - perMs, '+inf') end
local blocked, by = 0, false
if redis.call('TYPE', KEYS[3]).ok == 'string' then
  blocked = math.max(0, redis.call('PTTL', KEYS[3]))
  by = redis.call('GETRANGE', KEYS[3], 0, 199)
end
local held, heldCount = {}, 0
if redis.call('TYPE', KEYS[4]).ok == 'zset' then
  heldCount = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
  local bytes, budget = 0, tonumber(ARGV[2])
  -- One at a time: a forged member of megabytes costs one read past the budget, not ARGV[1] of them.
  for i = 0, tonumber(ARGV[1]) - 1 do
    local row = redis.call('ZREVRANGEBYSCORE', KEYS[4], '+inf', '(' .. now, 'WITHSCORES', 'LIMIT', i, 1)
    if #row < 2 then break end
    bytes = bytes + #row[1]
    if bytes > budget then break end
    table.insert(held, row[1])
    table.insert(held, tonumber(row[2]) - now)
  end
end
return { max, perMs, rec[3] == '1' and 1 or 0, ttl, used, blocked, by, held, heldCount, now }
`;
