// The bytes of one entry's fields and values as Redis holds them (Lua's # counts bytes); -1 when gone.
export const ENTRY_BYTES_SCRIPT = `
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if not e then return -1 end
local n = 0
for i = 1, #e[2] do n = n + #e[2][i] end
return n
`;
