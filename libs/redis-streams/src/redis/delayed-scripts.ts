import { LUA_NOW, LUA_NOW_FN } from './lua-now.js';

/**
 * Schedules an entry: the schedule (a sorted set beside the stream, in its slot) maps its id to
 * its due time, and the entries hash its fields (a JSON array `["data", "…", "headers", "…"]`).
 * An id already waiting is left as it is (a producer that repeats its write schedules once).
 * KEYS[1] schedule, KEYS[2] entries; ARGV[1] 'in' (ARGV[2] a delay in ms from now) or 'at'
 * (ARGV[2] a Unix time in ms), ARGV[3] id, ARGV[4] the fields. Returns {1 (scheduled) or 0
 * (already waiting), its due time in Redis ms}.
 */
export const SCHEDULE_SCRIPT = `${LUA_NOW}
local had = redis.call('ZSCORE', KEYS[1], ARGV[3])
if had then return {0, tonumber(had)} end
local due = tonumber(ARGV[2])
if ARGV[1] == 'in' then due = now + due end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[1], due, ARGV[3])
return {1, due}
`;

/**
 * Moves the entries due by Redis' clock (at most ARGV[1] per stream, earliest first, ties in id
 * order) from each stream's schedule into the stream, each XADDed, then removed from the schedule,
 * in one script: two workers never both promote one, and a worker killed mid-way leaves each entry
 * either waiting or in the stream. A value that is not a JSON array of field/value strings (a raw
 * producer's mistake) is written as the entry's `data` field, as it was: the consumer's decoding then
 * decides (a dead letter if it cannot read it), nothing is dropped. An id without a value (cancelled,
 * or a raw producer's ZADD alone) is dropped. The XADD comes first: should Redis refuse it, the entry
 * stays. A stream without a schedule costs an EXISTS (which the consumer's minimal ACL grants): a
 * worker never given the schedule's rights looks at streams nobody schedules to quietly.
 * KEYS: per stream its schedule, entries and stream (one reader's streams: one slot on a cluster);
 * ARGV[1] most entries to move per stream. Returns per stream {moved, dropped, ms until the next one
 * is due (-1: none waits), how many wait, why the stream refused an XADD ('' when it did not)}.
 */
export const PROMOTE_SCRIPT = `${LUA_NOW_FN}
local function fieldsOf(value)
  local ok, fields = pcall(cjson.decode, value)
  -- Past ~8,000 values Lua's unpack fails: such an entry goes in whole, as its data field.
  if not ok or type(fields) ~= 'table' or #fields == 0 or #fields % 2 == 1 or #fields > 7900 then return {'data', value} end
  for i = 1, #fields do
    if type(fields[i]) ~= 'string' then return {'data', value} end
  end
  return fields
end
local now
local out = {}
for s = 1, #KEYS, 3 do
  local schedule, entries, stream = KEYS[s], KEYS[s + 1], KEYS[s + 2]
  if redis.call('EXISTS', schedule) == 0 then
    out[#out + 1] = {0, 0, -1, 0, ''}
  else
    -- Redis' clock, read only once some schedule exists (TIME stays out of a quiet look).
    now = now or redisNow()
    local ids = redis.call('ZRANGE', schedule, '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]))
    local moved, dropped, refused = 0, 0, ''
    for _, id in ipairs(ids) do
      local value = redis.call('HGET', entries, id)
      if value then
        -- A stream that refuses (another type, OOM) keeps its entry waiting, and the other streams go on.
        local added = redis.pcall('XADD', stream, '*', unpack(fieldsOf(value)))
        if type(added) == 'table' and added.err then
          refused = added.err
          break
        end
        moved = moved + 1
      else
        dropped = dropped + 1
      end
      redis.call('ZREM', schedule, id)
      redis.call('HDEL', entries, id)
    end
    local nextOne = redis.call('ZRANGE', schedule, 0, 0, 'WITHSCORES')
    local wait = -1
    if nextOne[2] then wait = math.max(0, tonumber(nextOne[2]) - now) end
    out[#out + 1] = {moved, dropped, wait, redis.call('ZCARD', schedule), refused}
  end
end
return out
`;

/** Cancels a waiting entry. KEYS[1] schedule, KEYS[2] entries; ARGV[1] id. Returns 1 if it was waiting, else 0. */
export const CANCEL_SCRIPT = `
local n = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return n
`;

/**
 * How many wait and when the next is due, past due when negative (nobody moves them in). KEYS[1]
 * schedule. Returns {how many, 1 if one waits, ms until the next}. EXISTS first, as in PROMOTE_SCRIPT.
 */
export const LOOK_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0, 0} end
${LUA_NOW}
local nextOne = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if not nextOne[2] then return {0, 0, 0} end
return {redis.call('ZCARD', KEYS[1]), 1, tonumber(nextOne[2]) - now}
`;
