/**
 * For scripts (after LUA_IDS): makes an entry that is in nobody's pending list, and at or below the
 * group's last-delivered id `last`, pending under `me` again with delivery count `count` and idle
 * `idle` ms: XGROUP SETID just before it, XREADGROUP COUNT 1, XCLAIM RETRYCOUNT, then `last` put
 * back. Returns the entry's fields (what the XREADGROUP read).
 */
export const LUA_REDELIVER = `
local function redeliver(key, group, me, id, count, idle, last)
  redis.call('XGROUP', 'SETID', key, group, before(id))
  local read = redis.call('XREADGROUP', 'GROUP', group, me, 'COUNT', 1, 'STREAMS', key, '>')
  redis.call('XCLAIM', key, group, me, 0, id, 'IDLE', idle, 'RETRYCOUNT', count, 'JUSTID')
  redis.call('XGROUP', 'SETID', key, group, last)
  return read[1][2][1][2]
end
`;
