import { LUA_NOW } from './lua-now.js';

/** How long past its due time a retry record is kept: by then its entry was retried (or is gone). */
export const RETRY_RECORD_TTL_MS = 86_400_000;

/**
 * Records when a failed entry is due for its next try: the retry set (a sorted set beside the
 * stream, in its slot) maps its id to Redis' time now + the delay. Records a day past due are
 * dropped (their entry was retried, or deleted while it waited).
 * Only while the entry is pending under the consumer that failed it: one a peer took meanwhile (after
 * a lease lapse) is the peer's, and one in nobody's pending list may have been settled by a peer. So
 * a record is always written for an entry pending under its writer, and whoever tries it removes it
 * first (a claim at its due time, a reclaim's adoption once due): a record still there says nobody
 * tried the entry since (see AUDIT_SCRIPT).
 * KEYS[1] retry set, KEYS[2] stream; ARGV[1] delay in ms, ARGV[2] the entry's id, ARGV[3] group,
 * ARGV[4] consumer, ARGV[5] '1' when this delivery is not to count (a handler's RateLimitedException:
 * its delivery count is put back, so its retry counts as this delivery did). Returns the due time
 * (Redis ms), or -1 (not pending under the consumer: no record).
 */
export const SCHEDULE_RETRY_SCRIPT = `${LUA_NOW}
local ok, rows = pcall(redis.call, 'XPENDING', KEYS[2], ARGV[3], ARGV[2], ARGV[2], 1)
if not ok or not rows[1] or rows[1][2] ~= ARGV[4] then return -1 end
local due = now + tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ${RETRY_RECORD_TTL_MS}))
redis.call('ZADD', KEYS[1], due, ARGV[2])
if ARGV[5] == '1' then
  redis.call('XCLAIM', KEYS[2], ARGV[3], ARGV[4], 0, ARGV[2], 'RETRYCOUNT', math.max(0, tonumber(rows[1][4]) - 1), 'JUSTID')
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
