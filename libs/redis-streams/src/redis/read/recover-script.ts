import { LUA_IDS } from '../lua/lua-ids.js';
import { LUA_REDELIVER } from '../lua/lua-redeliver.js';
import { LUA_XINFO } from '../lua/lua-xinfo.js';

/**
 * Re-attaches one consumer to a group that may have been lost (XGROUP DESTROY, a server that
 * lost its data) and re-created, by itself or by a peer. A consumer the group does not list
 * has not read from it since it was (re-)created: then, atomically,
 * - the group's last-delivered id moves forward to the highest id this consumer had delivered,
 *   if it is below (what the consumer saw was delivered before the loss, and runs not again);
 * - each entry the consumer still owed (failed here, or fetched and not settled) that nobody
 *   has pending and that still exists is delivered to it again, with its old delivery count
 *   (XGROUP SETID just before it, XREADGROUP COUNT 1, XCLAIM RETRYCOUNT), the last-delivered id
 *   put back after. Its self-drain then settles them.
 * A consumer the group lists may still have lost some (an XACK or XGROUP DELCONSUMER by hand, the
 * consumer re-created since by a read of its own): each owed entry in nobody's pending list that
 * the caller says no peer can have claimed yet (`reown`) is delivered to it again the same way.
 * The script reports which owed ids are pending under it (the others were settled elsewhere, or deleted).
 *
 * KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] highest id delivered to it ('' none),
 * ARGV[4] '1' to treat the group as lost although it lists the consumer (its acks found entries
 * no longer pending: a peer re-created the group, and the consumer has read from it since), then
 * id, delivery count, reown ('1' or '0') triples it owes. Returns { 1 if the group was lost to it else 0, ids now
 * pending under it among those owed }, or -1 when the stream or the group is gone (lost again
 * since it was ensured: nothing is known of what it owes).
 */
export const RECOVER_SCRIPT = `${LUA_IDS}${LUA_XINFO}${LUA_REDELIVER}
local key, group, me, highest = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', key) == 0 then return -1 end
local g = groupOf(key, group)
if g == nil then return -1 end
local last = g['last-delivered-id']
local known = listsConsumer(key, group, me)
local lost = (not known) or ARGV[4] == '1'
if lost and highest ~= '' and less(last, highest) then
  redis.call('XGROUP', 'SETID', key, group, highest)
  last = highest
end
local owned = {}
for i = 5, #ARGV, 3 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', key, group, id, id, 1)[1]
  if p then
    if p[2] == me then owned[#owned + 1] = id end
  elseif (lost or ARGV[i + 2] == '1') and not less(last, id) and #redis.call('XRANGE', key, id, id) == 1 then
    redeliver(key, group, me, id, ARGV[i + 1], 0, last)
    owned[#owned + 1] = id
  end
end
return {lost and 1 or 0, owned}
`;
