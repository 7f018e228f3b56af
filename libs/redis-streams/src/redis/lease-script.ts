// Resets the idle time of entries this consumer still owns (XCLAIM … JUSTID leaves the
// delivery count alone) and reports which it owned: an entry a peer took meanwhile must
// not be taken back. ARGV[3] is the idle time to set: 0 renews, minIdleMs releases.
export const LEASE_SCRIPT = `
local owned = {}
local claim = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    owned[#owned + 1] = ARGV[i]
    claim[#claim + 1] = ARGV[i]
  end
end
if #owned > 0 then
  claim[#claim + 1] = 'IDLE'
  claim[#claim + 1] = ARGV[3]
  claim[#claim + 1] = 'JUSTID'
  redis.call(unpack(claim))
end
return owned
`;
