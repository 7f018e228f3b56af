import { LUA_RECORD_ITEMS } from './delayed-record.js';
import { LUA_OWN_IDEMPOTENCY_KEY } from '../../key-names.js';
import { LUA_NOW, LUA_NOW_FN } from '../lua/lua-now.js';

/**
 * Schedules an entry: the schedule (a sorted set beside the stream, in its slot) maps its id to its
 * due time, and the entries hash its record (delayed-record.ts). An id already waiting is left as it is.
 * With an idempotency key (KEYS[3], its record: idempotencyKeyOf), the key is taken as a plain idempotent
 * write takes it: a key held (written within the window, or waiting) schedules nothing; else the key
 * holds this entry's id while it waits and for the window after its due time, so that a plain write's
 * repeat meanwhile writes nothing (the promotion then sets the entry's stream id). An entry of the first
 * format waits under its key itself: that is a repeat too.
 * KEYS[1] schedule, KEYS[2] entries, KEYS[3] the key's record (with a key); ARGV[1] 'in' (ARGV[2] a delay in
 * ms from now) or 'at' (ARGV[2] a Unix time in ms), ARGV[3] id, ARGV[4] the record, with a key ARGV[5] the
 * key and ARGV[6] the window (s). Returns {1 (scheduled) or 0 (a repeat), its due time in Redis ms (-1: in the stream already)}.
 */
export const SCHEDULE_SCRIPT = `${LUA_NOW}
local schedule, entries, once = KEYS[1], KEYS[2], KEYS[3]
if once then
  local had = redis.call('ZSCORE', schedule, ARGV[5])
  if had then return {0, tonumber(had)} end
  local held = redis.call('GET', once)
  if held then
    local due = redis.call('ZSCORE', schedule, held)
    return {0, due and tonumber(due) or -1}
  end
end
local had = redis.call('ZSCORE', schedule, ARGV[3])
if had then return {0, tonumber(had)} end
local due = tonumber(ARGV[2])
if ARGV[1] == 'in' then due = now + due end
redis.call('HSET', entries, ARGV[3], ARGV[4])
redis.call('ZADD', schedule, due, ARGV[3])
if once then redis.call('SET', once, ARGV[3], 'PX', math.max(due - now, 0) + tonumber(ARGV[6]) * 1000) end
return {1, due}
`;

/**
 * The promotion of one entry, shared by PROMOTE_SCRIPT and the dashboard's promotion of one named entry
 * (PROMOTE_ONE_SCRIPT, redis/tools/entry-scripts.ts), so that both write the same entry: `promote(stream, id,
 * value, prefix, budget)` and `keyTrouble(reply, key, what)`. Needs LUA_RECORD_ITEMS and LUA_OWN_IDEMPOTENCY_KEY before it.
 */
export const LUA_PROMOTE_ENTRY = `
-- Decoding costs per value it makes (a record of a million strings held Redis 1.8 s): a record larger
-- than the call's budget (ARGV[2] bytes) with more than 16,000 commas, in its strings or not, goes in
-- whole, as one of more than 7,900 fields would; a comma count stops there, a memchr each.
local function jsonFields(value, budget)
  if #value > budget then
    local commas, at = 0, 0
    repeat
      at = string.find(value, ',', at + 1, true)
      commas = commas + 1
    until not at or commas > 16000
    if at then return {'data', value} end
  end
  local ok, fields = pcall(cjson.decode, value)
  -- Past ~8,000 values Lua's unpack fails: such an entry goes in whole, as its data field.
  if not ok or type(fields) ~= 'table' or #fields == 0 or #fields % 2 == 1 or #fields > 7900 then return {'data', value} end
  for i = 1, #fields do
    if type(fields[i]) ~= 'string' then return {'data', value} end
  end
  return fields
end
-- The entry's fields, and its idempotency (nil: none) as the record says.
local function readRecord(value, budget)
  local items, whole = recordItems(value, 7906)
  if not items then return jsonFields(value, budget) end
  local mode, first, once = items[1], 2, nil
  if mode == 'n' or mode == 'f' then
    first = 6
    once = {native = mode == 'n', producer = items[2], key = items[3], record = items[4], window = tonumber(items[5])}
  elseif mode ~= '' then whole = false end
  local n = #items - first + 1
  if not whole or n < 2 or n % 2 == 1 or n > 7900 then return {'data', value} end
  local fields = {}
  for i = first, #items do fields[#fields + 1] = items[i] end
  return fields, once
end
-- The stream id, and true when XADD … IDMP wrote nothing (the key already named an entry: it answers that one's id).
local function add(stream, fields, once)
  if once and once.native then
    local before = redis.pcall('XLEN', stream)
    local added = redis.pcall('XADD', stream, 'IDMP', once.producer, once.key, '*', unpack(fields))
    -- A server without IDMP (the producer's was another): the key's record alone.
    if type(added) ~= 'table' or not added.err then
      return added, type(before) == 'number' and redis.call('XLEN', stream) == before
    end
  end
  return redis.pcall('XADD', stream, '*', unpack(fields)), false
end
-- 'moved' and its stream id, or 'repeat', or nil and why it cannot go in.
local function promote(stream, id, value, prefix, budget)
  local fields, once = readRecord(value, budget)
  if once and not ownIdempotencyKey(prefix, once.record) then once = nil end
  if once then
    local held = redis.pcall('GET', once.record)
    -- Not a string (a forged name of another key): the entry goes in without it; refused (NOPERM): it waits.
    if type(held) == 'table' and held.err then
      if string.sub(held.err, 1, 9) ~= 'WRONGTYPE' then
        return nil, '"' .. once.record .. '", the record of its idempotency key, could not be read: the consumer needs +get +set on it (' .. held.err .. ')'
      end
      once, held = nil, false
    end
    if held and held ~= id then return 'repeat' end
    -- The schedule script set the key's record to this id, for the producer's window after the due time. A
    -- record it does not hold (written into the schedule by hand, or its window over) takes no key: its
    -- fields go in as a plain write, so that no one who may write a schedule takes the producers' keys.
    if held ~= id then once = nil end
  end
  local added, repeated = add(stream, fields, once)
  if type(added) == 'table' and added.err then return nil, 'the stream refused it (' .. added.err .. ')' end
  -- The key now names the entry's stream id, until the expiry its schedule set (nothing in the record decides it).
  if once then redis.pcall('SET', once.record, added, 'KEEPTTL') end
  -- Another write took the key meanwhile (Redis 8.6 keeps it in the stream): nothing went in.
  if repeated then return 'repeat' end
  return 'moved', added
end
-- A schedule key of another type (a key of the user's named like it): that stream's entries cannot move, said
-- with the key's name; any other refusal (NOPERM) fails the call, as redis.call would.
local function keyTrouble(reply, key, what)
  if string.sub(reply.err, 1, 9) ~= 'WRONGTYPE' then error(reply) end
  return '"' .. key .. '", its ' .. what .. ', holds another type (a key named like it?): rename one of them (' .. reply.err .. ')'
end
`;

/**
 * Moves the entries due by Redis' clock (earliest first, ties in id order) from each stream's schedule
 * into the stream, each XADDed, then removed from the schedule, in one script: two workers never both
 * promote one, and a worker killed mid-way leaves each entry either waiting or in the stream.
 * **Bounded by count and bytes for the whole call**: at most ARGV[1] entries and ARGV[2] bytes of records
 * (the first entry always moves, whatever its size: progress); a stream it stops inside says so
 * ('more' 1), and the streams after it are not looked at ('more' 2): the caller calls again at once.
 * A record of the first format (a JSON array of field/value strings) is read as before (one larger than
 * ARGV[2] bytes with more than 16,000 commas goes in whole: decoding costs per value); a value that is
 * neither (a raw producer's mistake) is written as the entry's `data` field, as it was: the consumer's
 * decoding then decides (a dead letter if it cannot read it), nothing is dropped. An id without a value
 * (cancelled, or a raw producer's ZADD alone) is dropped. An entry with an idempotency key is appended as
 * a plain idempotent write is (XADD … IDMP, or its key's record), unless its key is held by another
 * write (a repeat: dropped, counted); its record names the key's record, taken only under the stream's
 * own prefix (ARGV), and only while that record holds the entry's id (SCHEDULE_SCRIPT set it): a record
 * written into the schedule by hand takes no key. The key's record keeps the expiry the schedule set.
 * The XADD comes first: should Redis refuse it, the entry stays. Values whose schedule is gone (an
 * operator deleted it) are dropped with UNLINK (freed off the main thread), if they are a hash. A
 * schedule key of another type (a user's key named like it) stops its stream alone, named. A stream
 * without a schedule costs an EXISTS (which the consumer's minimal ACL grants).
 * KEYS: per stream its schedule, entries and stream (one reader's streams: one slot on a cluster);
 * ARGV[1] most entries, ARGV[2] most bytes, then per stream its idempotency keys' prefix.
 * Returns per stream {moved, dropped, ms until the next one is due (-1: none waits), how many wait,
 * why its entries cannot go in ('' when they can), more (0 done, 1 stopped inside, 2 not looked at), repeats}.
 */
export const PROMOTE_SCRIPT = `${LUA_NOW_FN}${LUA_RECORD_ITEMS}${LUA_OWN_IDEMPOTENCY_KEY}${LUA_PROMOTE_ENTRY}
local most, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
local count, bytes = 0, 0
local now
local out = {}
for s = 1, #KEYS, 3 do
  local schedule, entries, stream = KEYS[s], KEYS[s + 1], KEYS[s + 2]
  if count >= most or bytes >= budget then
    out[#out + 1] = {0, 0, -1, 0, '', 2, 0}
  elseif redis.call('EXISTS', schedule, entries) == 0 then
    out[#out + 1] = {0, 0, -1, 0, '', 0, 0}
  elseif redis.call('EXISTS', schedule) == 0 then
    -- Values no schedule names any more (it was deleted): nothing would ever move or count them. Only a
    -- hash: a key of another type under that name is the user's (a stream named like it), never dropped.
    local probe = redis.pcall('HGET', entries, '')
    if not (type(probe) == 'table' and probe.err) then redis.pcall('UNLINK', entries) end
    out[#out + 1] = {0, 0, -1, 0, '', 0, 0}
  else
    -- Redis' clock, read only once some schedule exists (TIME stays out of a quiet look).
    now = now or redisNow()
    local ids = redis.pcall('ZRANGE', schedule, '-inf', now, 'BYSCORE', 'LIMIT', 0, most - count)
    local moved, dropped, repeats, refused, more = 0, 0, 0, '', 0
    if ids.err then refused, ids = keyTrouble(ids, schedule, 'schedule'), {} end
    for _, id in ipairs(ids) do
      local value = redis.pcall('HGET', entries, id)
      if type(value) == 'table' then refused = keyTrouble(value, entries, "schedule's entries"); break end
      if value then
        if count > 0 and bytes + #value > budget then more = 1; break end
        bytes = bytes + #value
        -- A stream that refuses (another type, OOM) keeps its entry waiting, and the other streams go on.
        local done, why = promote(stream, id, value, ARGV[2 + (s + 2) / 3], budget)
        if not done then refused = why; break end
        if done == 'repeat' then repeats = repeats + 1 else moved = moved + 1 end
      else
        dropped = dropped + 1
      end
      count = count + 1
      redis.call('ZREM', schedule, id)
      redis.call('HDEL', entries, id)
    end
    if more == 0 and refused == '' and count >= most then more = 1 end
    local nextOne = redis.pcall('ZRANGE', schedule, 0, 0, 'WITHSCORES')
    local wait, waiting = -1, 0
    if not nextOne.err then
      if nextOne[2] then wait = math.max(0, tonumber(nextOne[2]) - now) end
      waiting = redis.call('ZCARD', schedule)
    end
    out[#out + 1] = {moved, dropped, wait, waiting, refused, more, repeats}
  end
end
return out
`;

/**
 * Cancels a waiting entry by its id, or by the idempotency key it was scheduled under (KEYS[3], that
 * key's record: it holds the entry's id while it waits). A cancelled entry's key is freed. KEYS[1]
 * schedule, KEYS[2] entries, KEYS[3] the record of the id taken as a key; ARGV[1] id, ARGV[2] the stream's
 * idempotency keys' prefix. Returns 1 if it was waiting, else 0. The reads a producer may lack the
 * rights for (a record, a key) are tried, not required; so is dropping the value once it left the schedule.
 */
export const CANCEL_SCRIPT = `${LUA_RECORD_ITEMS}${LUA_OWN_IDEMPOTENCY_KEY}
local schedule, entries, prefix = KEYS[1], KEYS[2], ARGV[2]
local function drop(id)
  local value = redis.pcall('HGET', entries, id)
  if type(value) == 'string' then
    local items = recordItems(value, 4)
    local record = items and (items[1] == 'n' or items[1] == 'f') and items[4]
    if record and ownIdempotencyKey(prefix, record) and redis.pcall('GET', record) == id then
      redis.pcall('DEL', record)
    end
  end
  -- Out of the schedule already, so cancelled: a value that cannot be dropped (a damaged hash, no +hdel) is left to the
  -- workers, which drop values no schedule names.
  redis.pcall('HDEL', entries, id)
end
if redis.call('ZREM', schedule, ARGV[1]) == 1 then
  drop(ARGV[1])
  return 1
end
local held = redis.pcall('GET', KEYS[3])
if type(held) == 'string' and redis.call('ZREM', schedule, held) == 1 then
  drop(held)
  return 1
end
redis.call('HDEL', entries, ARGV[1])
return 0
`;

/**
 * How many wait and when the next is due, past due when negative (nobody moves them in), and how many
 * values no schedule names (its schedule deleted, or ids removed from it by hand; -1: HLEN refused).
 * KEYS[1] schedule, KEYS[2] entries. Returns {how many, 1 if one waits, ms until the next, values without
 * a schedule}. EXISTS first, as in PROMOTE_SCRIPT.
 */
export const LOOK_SCRIPT = `
if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then return {0, 0, 0, 0} end
${LUA_NOW}
local waiting = redis.pcall('ZCARD', KEYS[1])
-- Another type under the schedule's name (a key named like it): said with its name.
if type(waiting) == 'table' then return redis.error_reply(waiting.err .. ': "' .. KEYS[1] .. '", the schedule, holds another type') end
local values = redis.pcall('HLEN', KEYS[2])
local orphaned = -1
if type(values) == 'number' then orphaned = math.max(0, values - waiting) end
local nextOne = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if not nextOne[2] then return {0, 0, 0, orphaned} end
return {waiting, 1, tonumber(nextOne[2]) - now, orphaned}
`;
