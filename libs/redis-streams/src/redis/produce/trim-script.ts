import { LUA_IDS } from '../lua/lua-ids.js';
import { LUA_XINFO } from '../lua/lua-xinfo.js';

/**
 * Trims a stream to its policy bound, never past what a group still needs (when safe): for
 * each group, its oldest pending entry and everything after its last-delivered id; and while
 * the stream has no group at all, nothing. Atomic, so a group cannot move between reading the
 * bound and trimming. Also serves unsafe policies that set both maxLen and maxAgeMs.
 *
 * Cost: the bound that groups allow is found first, in O(groups) (XINFO GROUPS and one
 * XPENDING … 1 per group); the length bound then looks only at entries below it, at most as
 * many as the stream is over `maxLen` and at most TRIM_SCAN_LIMIT, all of which the XTRIM then
 * removes. A lagging group therefore costs nothing to scan: every entry it still needs is above
 * the bound. A group whose last-delivered id is the largest possible needs nothing after it.
 *
 * With ARGV[5] = '1' (the server has `XTRIM … ACKED`, Redis 8.2) the safe trim leaves to Redis what
 * is still needed: ACKED keeps every entry pending in a group or not yet delivered to one, and removes
 * the acked entries after a pending one too (a retry waiting for hours no longer holds the whole stream
 * after it). The bound then only limits the scan, which ACKED makes per entry: at most ARGV[4] entries
 * below it, and none past a group's last-delivered id (all still needed). Not `XADD … ACKED` on every
 * write: that scans every entry over the bound a group still needs, on every write (a group 60,000
 * entries behind: 5–8 ms per XADD on Redis 8.6.3, against ~5 µs).
 *
 * KEYS[1] stream; ARGV[1] maxLen (0: none); ARGV[2] age bound id ('': none); ARGV[3] '1' = safe;
 * ARGV[4] most entries examined per call; ARGV[5] '1' = trim with ACKED. Returns the number of entries removed.
 */
export const TRIM_SCRIPT = `${LUA_IDS}${LUA_XINFO}
local key = KEYS[1]
local maxLen = tonumber(ARGV[1])
local limit = tonumber(ARGV[4])
local acked = ARGV[5] == '1'
local keep = nil
if ARGV[3] == '1' then
  local groups = redis.call('XINFO', 'GROUPS', key)
  if #groups == 0 then return 0 end
  for _, g in ipairs(groups) do
    local info = record(g)
    local need = after(info['last-delivered-id'])
    if not acked and tonumber(info['pending']) > 0 then
      local oldest = redis.call('XPENDING', key, info['name'], '-', '+', 1)[1]
      if oldest and (need == nil or less(oldest[1], need)) then need = oldest[1] end
    end
    if need ~= nil and (keep == nil or less(need, keep)) then keep = need end
  end
end
local bound = nil
local scanned = false
if maxLen > 0 then
  local excess = redis.call('XLEN', key) - maxLen
  if excess > 0 then
    local upper = '+'
    if keep ~= nil then upper = '(' .. keep end
    local old = redis.call('XRANGE', key, '-', upper, 'COUNT', math.min(excess, limit))
    if #old > 0 then
      bound = after(old[#old][1])
      scanned = true
    end
  end
end
if ARGV[2] ~= '' and (bound == nil or less(bound, ARGV[2])) then
  bound = ARGV[2]
  scanned = false
end
if bound == nil then return 0 end
if keep ~= nil and less(keep, bound) then bound = keep end
if not acked then return redis.call('XTRIM', key, 'MINID', bound) end
if not scanned then
  local head = redis.call('XRANGE', key, '-', '(' .. bound, 'COUNT', limit)
  if #head == limit then bound = after(head[#head][1]) or bound end
end
return redis.call('XTRIM', key, 'MINID', bound, 'ACKED')
`;

/**
 * Most entries one call reads and removes for the length bound. Lua has no ids-only range, so
 * this bounds the work of a call (10 KB entries: ~1 MB read, not 100 MB); the trim is exact
 * (`MINID`, no `~`), so each call makes progress however the stream's nodes are sized, and a
 * large backlog goes over several writes.
 */
export const TRIM_SCAN_LIMIT = 100;
