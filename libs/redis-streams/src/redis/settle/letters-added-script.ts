// How many entries a dead-letter stream was ever given and its last id (XINFO STREAM's entries-added and
// last-generated-id, Redis 7.0, Valkey 7.2), taken just before a move: a move whose answer is lost is judged by the
// letters added since (StreamCommands.letterSince). No writes, so a CLIENT PAUSE WRITE or a replica still answers it;
// its reply is these two values whatever the size of the stream's first and last entries. {0, '0-0'}: no such stream.
// KEYS: the dead-letter stream.
export const LETTERS_ADDED_SCRIPT = `#!lua flags=no-writes
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, '0-0'} end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local added, last
for i = 1, #info, 2 do
  if info[i] == 'entries-added' then added = info[i + 1] elseif info[i] == 'last-generated-id' then last = info[i + 1] end
end
return {added, last}
`;
