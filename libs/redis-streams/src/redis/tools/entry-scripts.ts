import { LUA_RECORD_ITEMS } from '../upkeep/delayed-record.js';
import { LUA_PROMOTE_ENTRY } from '../upkeep/delayed-scripts.js';
import { LUA_OWN_IDEMPOTENCY_KEY } from '../../key-names.js';
import { LUA_NOW } from '../lua/lua-now.js';

/**
 * The dead letters of one source entry in a dead-letter stream: letters whose `stream` and `sourceId`
 * are ARGV[2] and ARGV[3], read oldest first from ARGV[1] (the source id's ms: a letter is written after
 * its entry). A call stops once it has read ARGV[4] letters or ARGV[5] bytes of them, reading in chunks
 * of 1, 2, 4 … 32 letters, never more than the bytes left would hold at the weight seen so far. Not a
 * strict bound: XRANGE returns an entry whole and Redis cannot weigh one before reading it, so a letter of
 * megabytes costs its copy, and huge letters after small ones can take one read up to 32 past the budget. KEYS[1] the dead-letter stream. Returns {ids of the
 * letters found (at most ARGV[6]), how many were read, the id the read stopped at (false: at the end)}.
 */
export const LETTERS_OF_SCRIPT = `
if redis.call('TYPE', KEYS[1]).ok ~= 'stream' then return { {}, 0, false } end
local most, budget, keep = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local start, read, bytes, chunk, last = ARGV[1], 0, 0, 0, false
local found = {}
while read < most and bytes < budget and #found < keep do
  chunk = math.min(math.max(chunk * 2, 1), 32, most - read)
  if read > 0 then chunk = math.max(1, math.min(chunk, math.floor((budget - bytes) / math.max(bytes / read, 1)))) end
  local rows = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', chunk)
  for _, e in ipairs(rows) do
    read = read + 1
    last = e[1]
    local stream, source = nil, nil
    for i = 1, #e[2] - 1, 2 do
      bytes = bytes + #e[2][i] + #e[2][i + 1]
      if e[2][i] == 'stream' then stream = e[2][i + 1] elseif e[2][i] == 'sourceId' then source = e[2][i + 1] end
    end
    if stream == ARGV[2] and source == ARGV[3] then table.insert(found, e[1]) end
  end
  if #rows < chunk then return { found, read, false } end
  start = '(' .. last
end
return { found, read, last }
`;

/**
 * A page of a stream's delayed entries, earliest due first (KEYS[1] the schedule, KEYS[2] its entries),
 * or one of them. ARGV[1] 'page' or 'one'; ARGV[2] the id to start after ('' from the first; one gone
 * meanwhile: from its due time, ARGV[3]), or the one id; ARGV[4] most entries; ARGV[5] bytes shown of each
 * value; ARGV[6] most bytes of records read in all (HSTRLEN first: a record that would take the call past
 * it, even the first, is never read and comes with its size only: HGET copies a record whole, and one of
 * 50 MB cost Redis 120–160 ms a view); ARGV[7] most fields and values shown of each. Ranks and HSTRLEN
 * first: a page costs O(log n) plus at most ARGV[6] bytes of records.
 * Returns {waiting, Redis' now, rows, the id and due time to go on after (false: the last page)}, each
 * row {id, due time, record bytes, fields and values cut (false: not read), how many it has (-1: unknown),
 * its idempotency key (false: none)}; a record that is not of the current format is shown as its `data`.
 */
export const DELAYED_PAGE_SCRIPT = `${LUA_RECORD_ITEMS}${LUA_NOW}
local schedule, entries = KEYS[1], KEYS[2]
local t = redis.call('TYPE', schedule).ok
if t == 'none' then return { 0, now, {}, false } end
if t ~= 'zset' then return redis.error_reply('WRONGTYPE "' .. schedule .. '", the schedule, holds another type') end
local total = redis.call('ZCARD', schedule)
local most, max, budget, parts = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local ids = {}
if ARGV[1] == 'one' then
  local due = redis.call('ZSCORE', schedule, ARGV[2])
  if due then ids = { ARGV[2], due } end
else
  local from = 0
  if ARGV[2] ~= '' then
    local rank = redis.call('ZRANK', schedule, ARGV[2])
    if rank then from = rank + 1 else from = redis.call('ZCOUNT', schedule, '-inf', ARGV[3]) end
  end
  ids = redis.call('ZRANGE', schedule, from, from + most - 1, 'WITHSCORES')
end
local rows, bytes = {}, 0
for i = 1, #ids, 2 do
  local id, due = ids[i], tonumber(ids[i + 1])
  local size = redis.pcall('HSTRLEN', entries, id)
  if type(size) ~= 'number' then size = -1 end
  local shown, count, key = false, -1, false
  if size > 0 and bytes + size <= budget then
    bytes = bytes + size
    local value = redis.call('HGET', entries, id)
    local items, whole = recordItems(value, parts + 5)
    shown = {}
    if items then
      local first = 2
      if items[1] == 'n' or items[1] == 'f' then first = 6; key = items[3] or false end
      for j = first, #items do shown[#shown + 1] = string.sub(items[j], 1, max) end
      if whole then count = #items - first + 1 end
    else
      shown = { 'data', string.sub(value, 1, max) }
    end
  end
  rows[#rows + 1] = { id, due, size, shown, count, key }
end
local nextAfter = false
if ARGV[1] == 'page' and #ids == most * 2 then nextAfter = { ids[#ids - 1], ids[#ids] } end
return { total, now, rows, nextAfter }
`;

/**
 * Moves one named delayed entry into its stream now, if it still waits, by the workers' own promotion
 * (LUA_PROMOTE_ENTRY: the same fields, idempotency and refusals as PROMOTE_SCRIPT), in one script: of
 * several calls at once, or of a call and a worker's promotion, exactly one moves it, and only that one
 * says so. KEYS[1] schedule, KEYS[2] entries, KEYS[3] stream; ARGV[1] the id, ARGV[2] the stream's
 * idempotency keys' prefix, ARGV[3] the byte budget a record is weighed against (PROMOTE_SCRIPT's ARGV[2]).
 * Its record is read whole, whatever its size, as a worker's first entry of a call is: it must go in.
 * Returns {'moved', its stream id} | {'repeat'} (its idempotency key held by another write: dropped) |
 * {'dropped'} (no record: dropped, as a worker drops it) | {'refused', why (it waits)} | {'gone'}.
 */
export const PROMOTE_ONE_SCRIPT = `${LUA_RECORD_ITEMS}${LUA_OWN_IDEMPOTENCY_KEY}${LUA_PROMOTE_ENTRY}
local schedule, entries, stream, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local due = redis.pcall('ZSCORE', schedule, id)
if type(due) == 'table' then return { 'refused', keyTrouble(due, schedule, 'schedule') } end
if not due then return { 'gone' } end
local value = redis.pcall('HGET', entries, id)
if type(value) == 'table' then return { 'refused', keyTrouble(value, entries, "schedule's entries") } end
local done, detail = 'dropped', nil
if value then
  done, detail = promote(stream, id, value, ARGV[2], tonumber(ARGV[3]))
  if not done then return { 'refused', detail } end
end
redis.call('ZREM', schedule, id)
redis.call('HDEL', entries, id)
if done == 'moved' then return { 'moved', detail } end
return { done }
`;
