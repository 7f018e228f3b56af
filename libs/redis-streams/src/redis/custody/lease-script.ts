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

// Hands back entries read and not started (a pause): those this consumer still owns get the idle
// time ARGV[3] (minIdleMs: the next reclaim takes them) and the delivery count they had before its
// read (RETRYCOUNT), so that waiting costs them no delivery. The same with idle 0 and the count they
// were read with counts such an entry again as it starts (StreamCommands.recount). ARGV[4…]: id,
// count pairs (a batch: the caller's COUNT bounds them). Returns the ids it set.
export const PUT_BACK_SCRIPT = `
local owned = {}
for i = 4, #ARGV, 2 do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'RETRYCOUNT', ARGV[i + 1], 'JUSTID')
    owned[#owned + 1] = ARGV[i]
  end
end
return owned
`;
