import { FIELD } from '../../codec/wire-format.js';
import { LAST_MS } from '../../codec/schedule-record.js';
import { LUA_NOW, LUA_NOW_FN } from '../lua/lua-now.js';

/**
 * Repeatable schedules' scripts (docs/guide/schedules.md). Per stream three keys (scheduleKeysOf, key-names.ts):
 * `records` (hash: id → the record, codec/schedule-record.ts), `next` (sorted set: id → the next fire, Unix ms on
 * Redis' clock) and `fired` (hash: id → the last fire handed to the delayed schedule). A fire becomes one delayed
 * entry (delayed-scripts.ts' record format, mode '') under the delayed id `schedule:<id>@<fire ms>`, due at the
 * fire time: the delayed promoter moves it in then. The times are computed in JS (croner): the scripts only
 * compare and set them, on Redis' clock.
 */

/** The delayed id of a schedule's fire (Lua): one per (schedule, fire time), so a second hand-over of it while it waits adds nothing. */
const LUA_FIRE_ID = `
local function fireId(id, at) return 'schedule:' .. id .. '@' .. at end
`;

/**
 * What falls due soon: per stream the schedules whose next fire is at most ARGV[1] ms after Redis' now, earliest
 * first, with their records, bounded for the whole call by count (ARGV[2]) and record bytes (ARGV[3]; the first
 * always comes: progress). A record longer than ARGV[4] (the largest a set writes) is not read: it comes back as '!'
 * (damaged: the firer parks it); one of a later version (not `{"v":1,`) is passed over, four times the count looked at
 * at most. KEYS: per stream `next`, `records` (one reader's streams: one slot on a cluster).
 * Returns {now, per stream {ms from now to its first fire past the horizon (-1: none), more (0 done, 1 stopped
 * inside, 2 not looked at), refused ('' or why), then per due schedule: id, fire time, record ('' when gone)}}.
 * A stream without schedules costs an EXISTS.
 */
export const SCHEDULE_LOOK_SCRIPT = `${LUA_NOW_FN}
local now = redisNow()
local horizon = now + tonumber(ARGV[1])
local most, budget, largest = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local count, bytes = 0, 0
local out = {now}
for s = 1, #KEYS, 2 do
  local nextKey, records = KEYS[s], KEYS[s + 1]
  if count >= most or bytes >= budget then
    out[#out + 1] = {-1, 2, ''}
  elseif redis.call('EXISTS', nextKey) == 0 then
    out[#out + 1] = {-1, 0, ''}
  else
    -- A later version's records (not v1: its workers fire them) are passed over, within four times the count.
    local due = redis.pcall('ZRANGE', nextKey, '-inf', horizon, 'BYSCORE', 'LIMIT', 0, 4 * (most - count), 'WITHSCORES')
    if due.err then
      out[#out + 1] = {-1, 0, '"' .. nextKey .. '", the schedules\\' next fires, holds another type (' .. due.err .. ')'}
    else
      local row, more = {-1, 0, ''}, 0
      for i = 1, #due, 2 do
        if count >= most then more = 1; break end
        -- Its length first: a record past the largest a set writes is not read (it comes back as '!', damaged).
        local size = redis.pcall('HSTRLEN', records, due[i])
        local value = ''
        if type(size) ~= 'number' then size = 0 end
        if size > largest then
          value = '!'
        elseif size > 0 then
          value = redis.pcall('HGET', records, due[i])
          if type(value) ~= 'string' then value = '' end
        end
        local foreign = #value > 1 and string.sub(value, 1, 7) ~= '{"v":1,'
        if foreign then
          -- not this version's: skipped
        elseif count > 0 and bytes + #value > budget then more = 1; break
        else
        bytes = bytes + #value
        count = count + 1
        row[#row + 1] = due[i]
        row[#row + 1] = due[i + 1]
        row[#row + 1] = value
        end
      end
      local after = redis.call('ZRANGE', nextKey, '(' .. horizon, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      if after[2] then row[1] = tonumber(after[2]) - now end
      row[2] = more
      out[#out + 1] = row
    end
  end
end
return out
`;

/**
 * Fires (or skips) a stream's due schedules, each only if its next fire is still ARGV's (a CAS: another worker, or
 * an update, got there first → nothing) and its record's rev is the one the caller computed from. A fire puts one
 * entry into the stream's delayed schedule, due at the fire time, under fireId (already waiting: nothing added),
 * records it as the schedule's last fire, and moves the next fire on (or, none left, removes the schedule).
 At most one fire of a schedule waits at a time: while
 * its last fire is not due yet (a short `every` within the lookahead), the next is not handed over (so that a remove
 * or an update takes back everything handed over and not due).
 * KEYS[1] next, KEYS[2] records, KEYS[3] fired, KEYS[4] the delayed schedule, KEYS[5] its entries; ARGV in fives:
 * id, fire time, rev, action ('fire', 'skip', 'drop': the record is gone, or 'park': it is damaged, so its next fire
 * goes to LAST_MS, past every look), the next fire ('' none left; not a number: parked).
 * Returns per schedule {1 (done), 0 (raced: left as it is) or 2 (its last fire waits), ms until that one is due}.
 */
export const SCHEDULE_FIRE_SCRIPT = `${LUA_NOW_FN}${LUA_FIRE_ID}
local nextKey, records, fired, delayed, entries = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local function item(s) s = tostring(s); return #s .. ':' .. s end
local out = {}
local now
for i = 1, #ARGV, 5 do
  local id, at, rev, action, following = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local score = redis.call('ZSCORE', nextKey, id)
  local done, wait = 0, 0
  -- A damaged last fire (an operator's edit) counts as none.
  local last = score and action == 'fire' and tonumber(redis.call('HGET', fired, id))
  if last then
    now = now or redisNow()
    if last > now then done, wait = 2, last - now end
  end
  if following ~= '' and not tonumber(following) then action = 'park' end
  if done == 2 then
    -- its last fire still waits: this one is handed over once that one is due
  elseif score and tonumber(score) == tonumber(at) then
    if action == 'park' then
      -- A record this version cannot fire (damaged): out of every look's range, listed as unreadable, until a set.
      redis.call('ZADD', nextKey, ${LAST_MS}, id)
      done = 1
    elseif action == 'drop' then
      if redis.call('HEXISTS', records, id) == 0 then
        redis.call('ZREM', nextKey, id)
        redis.call('HDEL', fired, id)
        done = 1
      end
    else
      local value = redis.call('HGET', records, id)
      local ok, r = false, nil
      if value then ok, r = pcall(cjson.decode, value) end
      if ok and type(r) == 'table' and r.rev == rev and type(r.fields) == 'table' then
        if action == 'fire' then
          local fid = fireId(id, at)
          if not redis.call('ZSCORE', delayed, fid) then
            local parts = {'\\0RSD1', '0:'}
            for _, f in ipairs(r.fields) do parts[#parts + 1] = item(f) end
            parts[#parts + 1] = item('${FIELD.scheduleId}')
            parts[#parts + 1] = item(id)
            parts[#parts + 1] = item('${FIELD.fireTime}')
            parts[#parts + 1] = item(at)
            redis.call('HSET', entries, fid, table.concat(parts))
            redis.call('ZADD', delayed, at, fid)
          end
          redis.call('HSET', fired, id, at)
        end
        if following == '' then
          redis.call('ZREM', nextKey, id)
          redis.call('HDEL', records, id)
          redis.call('HDEL', fired, id)
        else
          redis.call('ZADD', nextKey, following, id)
        end
        done = 1
      end
    end
  end
  out[#out + 1] = {done, wait}
end
return out
`;

/**
 * What a set needs to compute the next fire: {Redis' now, the last fire handed over ('' none), the record ('' none)}.
 * KEYS[1] records, KEYS[2] fired; ARGV[1] id.
 */
export const SCHEDULE_STATE_SCRIPT = `${LUA_NOW}
return {now, redis.call('HGET', KEYS[2], ARGV[1]) or '', redis.call('HGET', KEYS[1], ARGV[1]) or ''}
`;

/**
 * Creates or updates a schedule, if its last fire is still the one the caller read (ARGV[3]; else {0}: read again).
 * A last fire still in the future (handed over within the lookahead, not due yet) is cancelled and the next fire is
 * ARGV[4] (computed from now: it may be that same time, with the new record); else ARGV[5] (after now and after the
 * last fire: a fire already due or in the stream is never handed over twice). '' for either: no fire left, and the
 * schedule is removed. KEYS as SCHEDULE_FIRE_SCRIPT's; ARGV[1] id, ARGV[2] record.
 * Returns {1, existed (0/1), cancelled (0/1), the next fire (-1: none)}.
 */
export const SCHEDULE_SET_SCRIPT = `${LUA_NOW}${LUA_FIRE_ID}
local nextKey, records, fired, delayed, entries = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local last = redis.call('HGET', fired, id) or ''
if last ~= ARGV[3] then return {0, 0, 0, -1} end
local cancelled = 0
if last ~= '' and tonumber(last) > now then
  local fid = fireId(id, last)
  if redis.call('ZREM', delayed, fid) == 1 then
    redis.call('HDEL', entries, fid)
    redis.call('HDEL', fired, id)
    cancelled = 1
  end
end
local following = ARGV[5]
if cancelled == 1 then following = ARGV[4] end
local existed = redis.call('HEXISTS', records, id)
if following == '' then
  redis.call('HDEL', records, id)
  redis.call('ZREM', nextKey, id)
  return {1, existed, cancelled, -1}
end
redis.call('HSET', records, id, ARGV[2])
redis.call('ZADD', nextKey, following, id)
return {1, existed, cancelled, tonumber(following)}
`;

/**
 * Removes a schedule, and its last fire if it still waits in the delayed schedule (nothing it handed over goes in
 * after the remove). KEYS as SCHEDULE_FIRE_SCRIPT's; ARGV[1] id. Returns {existed (0/1), cancelled (0/1)}.
 */
export const SCHEDULE_REMOVE_SCRIPT = `${LUA_FIRE_ID}
local nextKey, records, fired, delayed, entries = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local last = redis.call('HGET', fired, id)
local cancelled = 0
if last then
  local fid = fireId(id, last)
  if redis.call('ZREM', delayed, fid) == 1 then
    redis.call('HDEL', entries, fid)
    cancelled = 1
  end
end
local existed = redis.call('HDEL', records, id)
redis.call('ZREM', nextKey, id)
redis.call('HDEL', fired, id)
return {existed, cancelled}
`;

/**
 * A page of a stream's schedules: HSCAN of the records from cursor ARGV[1], about ARGV[2] of them, each with its
 * next fire and last fire. KEYS[1] records, KEYS[2] next, KEYS[3] fired. Returns {now, next cursor ('0': done),
 * how many there are, then per schedule: id, record, next fire ('' none), last fire ('' none)}.
 */
export const SCHEDULE_LIST_SCRIPT = `${LUA_NOW}
local page = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local out = {now, page[1], redis.call('HLEN', KEYS[1])}
local fields = page[2]
for i = 1, #fields, 2 do
  out[#out + 1] = fields[i]
  out[#out + 1] = fields[i + 1]
  out[#out + 1] = redis.call('ZSCORE', KEYS[2], fields[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], fields[i]) or ''
end
return out
`;

/** One schedule, as a page of the list holds it: KEYS as SCHEDULE_LIST_SCRIPT's, ARGV[1] id. Returns {now, record ('' none), next fire, last fire}. */
export const SCHEDULE_GET_SCRIPT = `${LUA_NOW}
return {now, redis.call('HGET', KEYS[1], ARGV[1]) or '', redis.call('ZSCORE', KEYS[2], ARGV[1]) or '', redis.call('HGET', KEYS[3], ARGV[1]) or ''}
`;
