/**
 * One reclaim round over several streams in one call: XAUTOCLAIM on each, and only the streams
 * where it claimed something, found deleted ids or has a cursor to carry are in the reply, so an
 * idle round over N streams costs the client one short reply, not N replies to build and parse.
 * A reader's streams share one slot on a cluster (see plan.ts): one script may take them all.
 * KEYS the streams; ARGV[1] group, ARGV[2] consumer, ARGV[3] min idle ms, then per key its cursor
 * and COUNT. Returns a flat list: a stream's index (from 1), then its XAUTOCLAIM reply.
 */
export const RECLAIM_ROUND_SCRIPT = `
local out = {}
for i = 1, #KEYS do
  local reply = redis.call('XAUTOCLAIM', KEYS[i], ARGV[1], ARGV[2], ARGV[3], ARGV[2 + 2 * i], 'COUNT', ARGV[3 + 2 * i])
  if reply[1] ~= '0-0' or #reply[2] > 0 or #reply[3] > 0 then
    out[#out + 1] = i
    out[#out + 1] = reply
  end
end
return out
`;
