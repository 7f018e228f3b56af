// Moves one entry to its dead-letter stream and acks it, in one step, only while `consumer`
// still owns it: a crash can neither lose it nor write it to the dead-letter stream twice.
// With ARGV[4] = '1' the letter gets a `fields` copy of the entry made here: Lua strings are
// bytes, so values that are not UTF-8 survive (cjson writes bytes >= 0x80 as they are), and
// one JSON value holds any number of fields. ARGV[5], ARGV[6]: the dead-letter stream's retention,
// 'MAXLEN' n (the newest n letters) or 'MINID' ms (letters younger than ms by Redis' TIME), or ''.
// ARGV[7]: '' acks with XACK; KEEPREF or ACKED acks with XACKDEL, so the entry leaves the source
// stream in the same step (deleteOnAck). KEYS[3], the group's retry set: the entry's retry record
// goes too (an entry dead-lettered by hand while it waited for its retry must not be taken back for
// it: see RETAKE_ORPHANS_SCRIPT); a user without +zrem there still moves it, the record left.
// KEYS: source, dead-letter stream, retry set; ARGV: group, consumer, id, copy, trim, trim value, deletion, dead-letter fields…
export const DEAD_LETTER_SCRIPT = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return false end
local letter = {KEYS[2]}
if ARGV[5] == 'MAXLEN' then
  letter[#letter + 1] = 'MAXLEN'
  letter[#letter + 1] = ARGV[6]
elseif ARGV[5] == 'MINID' then
  local t = redis.call('TIME')
  local bound = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[6])
  if bound > 0 then
    letter[#letter + 1] = 'MINID'
    letter[#letter + 1] = string.format('%.0f', bound)
  end
end
letter[#letter + 1] = '*'
for i = 8, #ARGV do letter[#letter + 1] = ARGV[i] end
if ARGV[4] == '1' then
  local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])[1]
  letter[#letter + 1] = 'fields'
  letter[#letter + 1] = e and cjson.encode(e[2]) or '[]'
end
local deadId = redis.call('XADD', unpack(letter))
if ARGV[7] == '' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
else
  redis.call('XACKDEL', KEYS[1], ARGV[1], ARGV[7], 'IDS', 1, ARGV[3])
end
redis.pcall('ZREM', KEYS[3], ARGV[3])
return deadId
`;
