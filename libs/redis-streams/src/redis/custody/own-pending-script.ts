import { LUA_NOW } from '../lua/lua-now.js';

/**
 * A page of one consumer's own pending list, for it to find entries it holds and owes none of (an
 * operator's XCLAIM gave them to it: it never fetched them). Per entry: its id, idle time, delivery
 * count and, when it waits for a retry, the ms until it is due (negative once due; Redis' clock),
 * '' when it has no record.
 * KEYS[1] stream, KEYS[2] its retry set; ARGV[1] group, ARGV[2] consumer, ARGV[3] where the page
 * starts ('-', '(' and the last id of the page before, or the id of an entry to look at again), ARGV[4] count. Returns -1 without the
 * stream or the group, else the rows, oldest first.
 */
export const OWN_PENDING_SCRIPT = `${LUA_NOW}
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local ok, rows = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], '+', tonumber(ARGV[4]), ARGV[2])
if not ok then return -1 end
local out = {}
for _, r in ipairs(rows) do
  local due = redis.call('ZSCORE', KEYS[2], r[1])
  out[#out + 1] = {r[1], r[3], r[4], due and tostring(tonumber(due) - now) or ''}
end
return out
`;
