// Moves one entry to its dead-letter stream and acks it, in one step, only while `consumer`
// still owns it: a crash can neither lose it nor write it to the dead-letter stream twice.
// With ARGV[4] = '1' the letter gets a `fields` copy of the entry made here: Lua strings are
// bytes, so values that are not UTF-8 survive (cjson writes bytes >= 0x80 as they are), and
// one JSON value holds any number of fields. KEYS: source, dead-letter stream;
// ARGV: group, consumer, id, copy, dead-letter fields…
export const DEAD_LETTER_SCRIPT = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return false end
local letter = {}
for i = 5, #ARGV do letter[#letter + 1] = ARGV[i] end
if ARGV[4] == '1' then
  local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])[1]
  letter[#letter + 1] = 'fields'
  letter[#letter + 1] = e and cjson.encode(e[2]) or '[]'
end
local deadId = redis.call('XADD', KEYS[2], '*', unpack(letter))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return deadId
`;
