import { LUA_IDS } from '../lua/lua-ids.js';
import { LUA_REDELIVER } from '../lua/lua-redeliver.js';
import { LUA_XINFO } from '../lua/lua-xinfo.js';

/**
 * Checks, for one consumer, entries it believes are pending under it: the ones in hand (`h`) and
 * the ones it failed and still owes (`o`). Per id, atomically:
 * - pending under it: `mine` and the idle time; an owed entry idle for `claimIdle` or more, or
 *   one whose scheduled retry is due (`r`), is claimed again for its retry (XCLAIM, which counts
 *   a delivery; a scheduled one's record leaves the retry set): `claimed`, its fields and count;
 * - pending under another consumer: `other` and who (an operator's XCLAIM, or a peer after a lapse);
 * - gone from the stream (trimmed, XDEL): `deleted` (an owed one's retry record goes too);
 * - still in the stream, in nobody's pending list, and above the group's last-delivered id: `above`.
 *   It was delivered to this consumer, so the group's mark has moved back below it since: the group
 *   was re-created lower (or an operator ran XGROUP SETID). Nobody was delivered it in this group,
 *   so nobody settled it here; the caller treats the group as lost (its rejoin moves the mark
 *   forward and takes the entry back);
 * - still in the stream but in nobody's pending list otherwise (XGROUP DELCONSUMER, an XACK by
 *   hand, or a peer that took and settled it while this consumer was held up): `dropped`, unless
 *   the caller allows a re-own (it knows no peer could have claimed it yet), or the entry waits for
 *   a scheduled retry (`w`, `r`) and its record is still in the retry set: whoever tries an entry
 *   removes its record first (a claim at its due time, or a reclaim's adoption once due), and a
 *   failure records it again only while the entry stays pending, so a record left says that
 *   nobody settled it since it failed. Then it is pending under this consumer again (XGROUP SETID
 *   just before it, XREADGROUP COUNT 1, XCLAIM RETRYCOUNT, the last-delivered id put back):
 *   `reowned`, with its fields and its count.
 *
 * KEYS[1] stream, KEYS[2] its retry set; ARGV[1] group, ARGV[2] consumer, ARGV[3] claimIdle ('' none),
 * then per id: id, kind ('h' held | 'o' owed | 'w' waiting for a scheduled retry | 'r' its retry due),
 * '1' to allow a re-own, delivery count and idle time to give it when re-owned.
 * Returns -1 without the group, else { 1 if the group lists the consumer else 0, results },
 * each result { code, detail, fields? }.
 */
export const AUDIT_SCRIPT = `${LUA_IDS}${LUA_XINFO}${LUA_REDELIVER}
local key, group, me, claimIdle = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', key) == 0 then return -1 end
local g = groupOf(key, group)
if g == nil then return -1 end
local last = g['last-delivered-id']
local known = listsConsumer(key, group, me) and 1 or 0
local out = {}
for i = 4, #ARGV, 5 do
  local id, kind, reown, count, idle = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local p = redis.call('XPENDING', key, group, id, id, 1)[1]
  if p and p[2] == me then
    if kind == 'r' or (kind == 'o' and claimIdle ~= '' and p[3] >= tonumber(claimIdle)) then
      if kind == 'r' then redis.call('ZREM', KEYS[2], id) end
      local e = redis.call('XCLAIM', key, group, me, 0, id)[1]
      if e then out[#out + 1] = {'claimed', tostring(p[4] + 1), e[2]} else out[#out + 1] = {'deleted', ''} end
    else
      out[#out + 1] = {'mine', tostring(p[3])}
    end
  elseif p then
    out[#out + 1] = {'other', p[2]}
  elseif #redis.call('XRANGE', key, id, id) == 0 then
    -- Gone from the stream: a retry it waited for goes too.
    if kind ~= 'h' then redis.call('ZREM', KEYS[2], id) end
    out[#out + 1] = {'deleted', ''}
  elseif less(last, id) then
    out[#out + 1] = {'above', ''}
  elseif reown == '1' or ((kind == 'w' or kind == 'r') and redis.call('ZSCORE', KEYS[2], id)) then
    out[#out + 1] = {'reowned', count, redeliver(key, group, me, id, count, idle, last)}
  else
    out[#out + 1] = {'dropped', ''}
  end
end
return {known, out}
`;
