import { LUA_XINFO } from '../lua/lua-xinfo.js';

/**
 * One stream's figures for the dashboard in one call, without sending a single entry back: its
 * length and ids, and per group its counts, the first id not yet delivered (the lag's age), its
 * oldest pending entry (id, owner, idle) and its first ARGV[1] consumers. The scan of XINFO and
 * XRANGE stays in Redis: entries of megabytes cost a copy there (XINFO STREAM copies the first and
 * last entries, the lag's age one more), not a transfer. {} when the key is no stream.
 */
export const STREAM_SUMMARY_SCRIPT = `${LUA_XINFO}
local key = KEYS[1]
if redis.call('TYPE', key).ok ~= 'stream' then return {} end
local s = record(redis.call('XINFO', 'STREAM', key))
local groups = {}
for _, row in ipairs(redis.call('XINFO', 'GROUPS', key)) do
  local g = record(row)
  local ok, after = pcall(redis.call, 'XRANGE', key, '(' .. g['last-delivered-id'], '+', 'COUNT', 1)
  local first = ok and after[1] or nil
  local oldest = redis.call('XPENDING', key, g['name'], '-', '+', 1)[1]
  local consumers = {}
  local listed = redis.call('XINFO', 'CONSUMERS', key, g['name'])
  -- At most MAX_CONSUMERS of them, each with one XPENDING of one row; the count says how many there are.
  for i = 1, math.min(#listed, tonumber(ARGV[1])) do
    local r = record(listed[i])
    local own = r['pending'] > 0 and redis.call('XPENDING', key, g['name'], '-', '+', 1, r['name'])[1] or nil
    table.insert(consumers, { r['name'], r['pending'], r['idle'], r['inactive'] or -2, own and own[1] or false, own and own[3] or -1 })
  end
  table.insert(groups, {
    g['name'], g['pending'], g['last-delivered-id'], g['entries-read'] or -1, g['lag'] or -1,
    first and first[1] or false, oldest and oldest[1] or false, oldest and oldest[2] or false, oldest and oldest[3] or -1, consumers, #listed,
  })
end
local firstEntry = s['first-entry']
-- Idempotent produce's fields (Redis 8.6), as XINFO names them: parsed where XINFO STREAM's are (info-replies.ts).
local idmp = {}
for _, f in ipairs({ 'idmp-duration', 'idmp-maxsize', 'pids-tracked', 'iids-tracked', 'iids-added', 'iids-duplicates' }) do
  if s[f] ~= nil then table.insert(idmp, f); table.insert(idmp, s[f]) end
end
return { s['length'], s['last-generated-id'], s['entries-added'] or s['length'], groups, firstEntry and firstEntry[1] or false, idmp }
`;

/** A dead-letter stream's length; -1 when the key holds another type (reported, never a WRONGTYPE), -2 when absent. */
export const DEAD_LENGTH_SCRIPT = `
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return -2 end
if t ~= 'stream' then return -1 end
return redis.call('XLEN', KEYS[1])
`;

/**
 * XRANGE with every value cut to ARGV[4] bytes inside Redis (0: ids only), and each value's full
 * length: pages of large entries cost what they show. ARGV: start, end, count, maxBytes, maxParts.
 */
export const RANGE_PREVIEW_SCRIPT = `
if redis.call('TYPE', KEYS[1]).ok ~= 'stream' then return {} end
local max, parts = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])) do
  local cut, sizes = {}, {}
  if max > 0 then
    -- At most ARGV[5] parts (field names and values) of each entry; sizes of all of them.
    for i = 1, #e[2] do
      if i <= parts then cut[i] = string.sub(e[2][i], 1, max) end
      sizes[i] = #e[2][i]
    end
  end
  table.insert(out, { e[1], cut, sizes })
end
return out
`;

/**
 * A stream's entries newest first (XREVRANGE ARGV[1] ARGV[2]), each value cut to ARGV[4] bytes and at
 * most ARGV[5] parts, as RANGE_PREVIEW_SCRIPT (with each entry's count of parts). With a field (ARGV[7])
 * it keeps those whose field holds ARGV[8] (a plain substring), among at most ARGV[6] read. Whatever
 * the entries' size, a call stops once it has read ARGV[9] bytes or ARGV[10] parts: it reads in chunks
 * of 1, 2, 4 then 8 entries (never more than the budget left would hold at the weight seen so far), so
 * it reads at most 8 entries past its budget (an entry is read whole: one of a million fields costs
 * that). Returns { entries, the id the read stopped at (false when it reached the oldest), how many were read }.
 */
export const BROWSE_SCRIPT = `
if redis.call('TYPE', KEYS[1]).ok ~= 'stream' then return { {}, false, 0 } end
local count, max, parts, window = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local field, value = ARGV[7], ARGV[8]
local budget, partsBudget = tonumber(ARGV[9]), tonumber(ARGV[10])
local limit = field ~= '' and window or count
local upper = ARGV[1]
local out, last, read, bytes, seen, oldest, chunk = {}, false, 0, 0, 0, false, 0
while read < limit and #out < count and bytes < budget and seen < partsBudget do
  -- Doubling up to 8, and no more than the budget left would hold at the weight seen so far.
  chunk = math.min(math.max(chunk * 2, 1), 8, limit - read)
  if read > 0 then
    local fits = math.floor(math.min((budget - bytes) / math.max(bytes / read, 1), (partsBudget - seen) / math.max(seen / read, 1)))
    chunk = math.max(1, math.min(chunk, fits))
  end
  local rows = redis.call('XREVRANGE', KEYS[1], upper, ARGV[2], 'COUNT', chunk)
  local done = 0
  for _, e in ipairs(rows) do
    done = done + 1
    read = read + 1
    last = e[1]
    seen = seen + #e[2]
    for i = 1, #e[2] do bytes = bytes + #e[2][i] end
    local keep = field == ''
    if not keep then
      for i = 1, #e[2] - 1, 2 do
        if e[2][i] == field and string.find(e[2][i + 1], value, 1, true) then keep = true; break end
      end
    end
    if keep then
      local cut, sizes = {}, {}
      for i = 1, math.min(#e[2], parts) do
        cut[i] = string.sub(e[2][i], 1, max)
        sizes[i] = #e[2][i]
      end
      table.insert(out, { e[1], cut, sizes, #e[2] })
    end
    if #out == count or bytes >= budget or seen >= partsBudget then break end
  end
  -- The oldest is reached only when a short chunk was read to its end (a page may stop inside one).
  if #rows < chunk and done == #rows then oldest = true; break end
  if done < #rows then break end
  upper = '(' .. last
end
return { out, (not oldest) and last or false, read }
`;
