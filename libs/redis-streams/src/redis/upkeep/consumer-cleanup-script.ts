import { LUA_XINFO } from '../lua/lua-xinfo.js';

// Deletes the group's consumers idle for at least ARGV[2] ms that own no pending entry, in one
// atomic step: no entry can be delivered to a consumer between the check and XGROUP DELCONSUMER
// (which would drop it from the PEL). KEYS[2] is a lock taken for ARGV[3] ms, so that however
// many workers beat, the group is cleaned at most once per interval; returns false when it was held,
// -1 when the lock key exists without an expiry (a key that is not this lock: nothing is cleaned).
// ARGV[5…] name consumers with a connection open (connected-consumers.ts): never deleted, whatever
// their idle time says (Redis 7.0 does not reset it on empty reads).
// KEYS: stream, lock; ARGV: group, idle ms, interval ms, the caller's own consumer name, connected names….
export const CONSUMER_CLEANUP_SCRIPT = `${LUA_XINFO}
if not redis.call('SET', KEYS[2], ARGV[4], 'NX', 'PX', ARGV[3]) then
  if redis.call('PTTL', KEYS[2]) == -1 then return -1 end
  return false
end
local idleMs = tonumber(ARGV[2])
local connected = {}
for i = 5, #ARGV do connected[ARGV[i]] = true end
local deleted = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = record(c)
  if f['name'] ~= ARGV[4] and not connected[f['name']] and tonumber(f['pending']) == 0 and tonumber(f['idle']) >= idleMs then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], f['name'])
    deleted[#deleted + 1] = f['name']
  end
end
return deleted
`;
