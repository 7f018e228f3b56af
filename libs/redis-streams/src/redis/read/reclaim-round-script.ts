/**
 * One reclaim round over several streams in one call: XAUTOCLAIM on each in turn, COUNT what is
 * left of the round's budget, until the budget is spent; only the streams where it claimed
 * something, found deleted ids or has a cursor to carry are in the reply, so an idle round over
 * N streams costs the client one short reply, and a busy one claims one batch at most.
 * A reader's streams share one slot on a cluster (see plan.ts): one script may take them all.
 * KEYS the streams; ARGV[1] group, ARGV[2] consumer, ARGV[3] min idle ms, ARGV[4] the budget
 * (entries to claim at most), then per key its cursor. Returns how many streams were visited
 * (the others wait for the next round, cursors untouched), then per stream to report its index
 * (from 1) and its XAUTOCLAIM reply. A stream whose XAUTOCLAIM fails (NOGROUP) ends the round:
 * its negated index and the error close the reply, so what the streams before it claimed (Lua
 * does not roll back) still reaches the consumer, to be settled before the error restarts it.
 */
export const RECLAIM_ROUND_SCRIPT = `
local out = {0}
local budget = tonumber(ARGV[4])
for i = 1, #KEYS do
  if budget < 1 then break end
  local reply = redis.pcall('XAUTOCLAIM', KEYS[i], ARGV[1], ARGV[2], ARGV[3], ARGV[4 + i], 'COUNT', budget)
  if reply.err then
    out[#out + 1] = -i
    out[#out + 1] = reply.err
    return out
  end
  out[1] = i
  budget = budget - #reply[2]
  if reply[1] ~= '0-0' or #reply[2] > 0 or #reply[3] > 0 then
    out[#out + 1] = i
    out[#out + 1] = reply
  end
end
return out
`;
