import { LUA_IDS } from '../lua/lua-ids.js';
import { LUA_NOW } from '../lua/lua-now.js';
import { LUA_REDELIVER } from '../lua/lua-redeliver.js';
import { LUA_XINFO } from '../lua/lua-xinfo.js';

/** How long past its due time a retry record is kept: by then its entry was retried (or is gone). */
export const RETRY_RECORD_TTL_MS = 86_400_000;

/**
 * Records when a failed entry is due for its next try: the retry set (a sorted set beside the
 * stream, in its slot) maps its id to Redis' time now + the delay. Records a day past due are
 * dropped (their entry was retried, or deleted while it waited).
 * Only while nobody was delivered the entry since the consumer that failed it: pending under that
 * consumer, or under another with the same delivery count (an XCLAIM … JUSTID by hand while it was
 * in hand: that consumer never fetched it, and knows nothing of it; the record is then the only
 * trace of its retry should that consumer be deleted, see RETAKE_ORPHANS_SCRIPT). One a peer took
 * meanwhile (after a lease lapse: one delivery more) is the peer's. One in nobody's pending list
 * (an XGROUP DELCONSUMER of this consumer, or an XACK by hand, while it was in hand) is made pending
 * under it again with its count (XGROUP SETID just before it, XREADGROUP COUNT 1, XCLAIM RETRYCOUNT,
 * the last-delivered id put back) and recorded, when the caller says no peer can have taken and
 * settled it (its lease held it a moment ago), so that no window is left in which a kill of this
 * consumer loses it; otherwise it is not recorded. So whoever tries an entry removes its record
 * first (a claim at its due time, a reclaim's adoption once due): a record still there says nobody
 * tried the entry since (see AUDIT_SCRIPT).
 * KEYS[1] retry set, KEYS[2] stream; ARGV[1] delay in ms, ARGV[2] the entry's id, ARGV[3] group,
 * ARGV[4] consumer, ARGV[5] '1' when this delivery is not to count (a handler's RateLimitedException:
 * its delivery count is put back, so its retry counts as this delivery did), ARGV[6] the failed
 * delivery's count ('' to record it only under ARGV[4]), ARGV[7] '1' to take it back when it is in
 * nobody's pending list. Returns the due time (Redis ms), or -1 (not recorded).
 */
export const SCHEDULE_RETRY_SCRIPT = `${LUA_NOW}${LUA_IDS}${LUA_XINFO}${LUA_REDELIVER}
local ok, rows = pcall(redis.call, 'XPENDING', KEYS[2], ARGV[3], ARGV[2], ARGV[2], 1)
if not ok then return -1 end
local p = rows[1]
if not p then
  if ARGV[7] ~= '1' or ARGV[6] == '' or #redis.call('XRANGE', KEYS[2], ARGV[2], ARGV[2]) == 0 then return -1 end
  local g = groupOf(KEYS[2], ARGV[3])
  if g == nil or less(g['last-delivered-id'], ARGV[2]) then return -1 end
  redeliver(KEYS[2], ARGV[3], ARGV[4], ARGV[2], ARGV[6], 0, g['last-delivered-id'])
  p = {ARGV[2], ARGV[4], 0, tonumber(ARGV[6])}
end
local mine = p[2] == ARGV[4]
if not mine and (ARGV[6] == '' or tonumber(p[4]) ~= tonumber(ARGV[6])) then return -1 end
local due = now + tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ${RETRY_RECORD_TTL_MS}))
redis.call('ZADD', KEYS[1], due, ARGV[2])
if mine and ARGV[5] == '1' then
  redis.call('XCLAIM', KEYS[2], ARGV[3], ARGV[4], 0, ARGV[2], 'RETRYCOUNT', math.max(0, tonumber(p[4]) - 1), 'JUSTID')
end
return due
`;

/**
 * For entries a consumer has just been delivered by self-drain or reclaim: one that waits for a
 * retry not yet due (its consumer stopped or died while it waited) is adopted, i.e. kept pending
 * under this consumer with the delivery count it had (RETRYCOUNT: this delivery was no try), to
 * be tried at its due time; one whose retry is due is this delivery's to try, and its record goes.
 * Past `room` adoptions (the consumer's maxWaitingRetries) a waiting entry is left to the group
 * instead: its count put back and its idle time set so that a reclaim takes it at its due time.
 * KEYS[1] stream, KEYS[2] retry set; ARGV[1] group, ARGV[2] consumer, ARGV[3] room, ARGV[4]
 * minIdleMs, then per entry: id, its delivery count as delivered. Returns per entry the ms until
 * its retry (adopted), -1 to try it now, or -2 (left to the group).
 */
export const ADOPT_RETRY_SCRIPT = `${LUA_NOW}
local out = {}
local room, minIdle = tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 5, #ARGV, 2 do
  local id, count = ARGV[i], tonumber(ARGV[i + 1])
  local due = redis.call('ZSCORE', KEYS[2], id)
  local wait = -1
  if due and tonumber(due) > now then
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)[1]
    if p and p[2] == ARGV[2] then
      wait = tonumber(due) - now
      local idle = 0
      if room > 0 then room = room - 1 else idle = math.max(0, minIdle - wait); wait = -2 end
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'IDLE', idle, 'RETRYCOUNT', math.max(0, count - 1), 'JUSTID')
    end
  elseif due then
    redis.call('ZREM', KEYS[2], id)
  end
  out[#out + 1] = wait
end
return out
`;

/** The delivery count a retaken orphan is tried with: its first, failed delivery and this one (Redis dropped the real count with its consumer). */
export const RETAKEN_DELIVERY_COUNT = 2;

/**
 * Retries left with nobody: records of the retry set due `ARGV[4]` ms ago or more whose entry is in
 * nobody's pending list but still in the stream, at or below the group's last-delivered id. A record
 * says nobody tried its entry since it failed (see SCHEDULE_RETRY_SCRIPT), so the entry was dropped
 * from the PEL by an operator: an XGROUP DELCONSUMER of a consumer it had been XCLAIMed to by hand
 * (which never knew it was its own), or an XACK by hand. Each is made pending under `ARGV[2]` again
 * (XGROUP SETID just before it, XREADGROUP COUNT 1, XCLAIM RETRYCOUNT, the last-delivered id put
 * back), its record removed as a claim at its due time removes it, and returned with its fields: the
 * caller tries it now. Records whose entry is gone from the stream go. Pending ones (their owner
 * keeps them, or a reclaim takes them) are skipped; above the last-delivered id, the group's reads
 * deliver it.
 * Bounded: at most ARGV[5] records from rank ARGV[3] among the due ones, and it stops once the
 * entries it read reach ARGV[6] bytes.
 * KEYS[1] stream, KEYS[2] its retry set; ARGV[1] group, ARGV[2] consumer, ARGV[3] cursor, ARGV[4]
 * grace ms, ARGV[5] count, ARGV[6] byte budget. Returns -1 without the stream or the group, else
 * { next cursor (0: the due records were all seen), { id, fields } per retaken entry, records dropped }.
 */
export const RETAKE_ORPHANS_SCRIPT = `${LUA_NOW}${LUA_IDS}${LUA_XINFO}${LUA_REDELIVER}
if redis.call('EXISTS', KEYS[2]) == 0 then return {0, {}, 0} end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local g = groupOf(KEYS[1], ARGV[1])
if g == nil then return -1 end
local last = g['last-delivered-id']
local cursor, count, budget = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ids = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. (now - tonumber(ARGV[4])), 'BYSCORE', 'LIMIT', cursor, count)
local retaken, dropped, seen, bytes = {}, 0, 0, 0
for _, id in ipairs(ids) do
  if bytes >= budget then break end
  seen = seen + 1
  if not redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)[1] then
    local e = redis.call('XRANGE', KEYS[1], id, id)[1]
    if not e then
      redis.call('ZREM', KEYS[2], id)
      dropped = dropped + 1
    elseif not less(last, id) then
      for i = 1, #e[2] do bytes = bytes + #e[2][i] end
      redis.call('ZREM', KEYS[2], id)
      retaken[#retaken + 1] = {id, redeliver(KEYS[1], ARGV[1], ARGV[2], id, ${RETAKEN_DELIVERY_COUNT}, 0, last)}
    end
  end
end
local next = cursor + seen - dropped - #retaken
if seen == #ids and #ids < count then next = 0 end
return {next, retaken, dropped}
`;
