import { LUA_NOW } from '../lua/lua-now.js';

/**
 * Gives back the slots of entries whose handlers ended, then takes a slot of each key asked for (a fair group's
 * `inHand`), on Redis' clock, in one round trip. KEYS: the g keys' slots given back, then the t keys' slots asked
 * for (sorted sets: member → until when); ARGV[1] g, ARGV[2] inHand, ARGV[3] the lease in ms, then the g members
 * given back and the t members asked for. Slots past their lease are dropped first (their worker died, or was cut
 * off for longer than a lease). A member already in holds its slot still (the same entry, taken over from a worker
 * that died). Returns one 0/1 per slot asked for. The caller bounds #KEYS and each key's length.
 */
export const EXCHANGE_SLOTS_SCRIPT = `${LUA_NOW}
local g, inHand, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, g do redis.call('ZREM', KEYS[i], ARGV[3 + i]) end
local got = {}
for i = g + 1, #KEYS do
  local key, member = KEYS[i], ARGV[3 + i]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZSCORE', key, member) or redis.call('ZCARD', key) < inHand then
    redis.call('ZADD', key, now + lease, member)
    redis.call('PEXPIRE', key, lease)
    got[#got + 1] = 1
  else
    got[#got + 1] = 0
  end
end
return got
`;

/**
 * Keeps the slots of entries still in hand for another lease (ARGV[1] ms): KEYS[i] their key's slots,
 * ARGV[i + 1] the member. Returns one 0/1 per slot: 0 for one that was gone (its lease ran out first).
 */
export const KEEP_SLOTS_SCRIPT = `${LUA_NOW}
local lease = tonumber(ARGV[1])
local kept = {}
for i = 1, #KEYS do
  local key, member = KEYS[i], ARGV[i + 1]
  local till = redis.call('ZSCORE', key, member)
  if till and tonumber(till) > now then
    redis.call('ZADD', key, now + lease, member)
    if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, lease) end
    kept[i] = 1
  else
    if till then redis.call('ZREM', key, member) end
    kept[i] = 0
  end
end
return kept
`;
