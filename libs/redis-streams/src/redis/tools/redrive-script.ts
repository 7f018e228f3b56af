/**
 * Re-appends one dead letter's fields to `target` and deletes the letter, in one step (two
 * operators re-driving at once cannot duplicate it). Lua strings are bytes: values are copied
 * byte for byte. KEYS: dead-letter stream [, target when in the same slot]; ARGV: letter id,
 * target, most values to append here (0: only read). Replies, as a flat array:
 *   gone                       the letter is no longer there
 *   skip <code> [<detail>]     the letter cannot be re-driven to target (nothing written)
 *   ok <new id>                re-driven
 *   kept <new id> <error>      appended, but the letter could not be deleted (it would be re-driven again)
 *   fields <f1> <v1> …         what to append, when asked only to read or too wide for one
 *                              redis.call (Lua's unpack stops near 8,000 values)
 * A request's `replyTo`/`correlationId` are dropped: a re-driven entry is an event, never a
 * request whose reply a letter's writer could aim at any key.
 */
export const REDRIVE_SCRIPT = `
local target = KEYS[2] or ARGV[2]
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if not e then return {'gone'} end
local f = {}
for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
if f['stream'] ~= target then return {'skip', 'stream', f['stream'] or ''} end
-- Raw control bytes: JSON (and so the listing an operator reads) refuses them; cjson would not.
if string.find(f['fields'] or '', '[%z\\1-\\31]') then return {'skip', 'json'} end
local ok, fields = pcall(cjson.decode, f['fields'] or '')
if not ok or type(fields) ~= 'table' then return {'skip', 'json'} end
local n = #fields
if n == 0 or n % 2 == 1 then return {'skip', 'pairs'} end
local out = {'fields'}
for i = 1, n, 2 do
  local k, v = fields[i], fields[i + 1]
  if type(k) ~= 'string' or type(v) ~= 'string' then return {'skip', 'strings'} end
  if k ~= 'replyTo' and k ~= 'correlationId' then
    out[#out + 1] = k
    out[#out + 1] = v
  end
end
if #out == 1 then return {'skip', 'empty'} end
if #out - 1 > tonumber(ARGV[3]) then return out end
table.remove(out, 1)
local id = redis.call('XADD', target, '*', unpack(out))
-- A refused XDEL (an ACL without it) must not hide the append that was made.
local del = redis.pcall('XDEL', KEYS[1], ARGV[1])
if type(del) == 'table' and del.err then return {'kept', id, del.err} end
return {'ok', id}
`;

/** Most values the script appends itself; a wider letter is appended by the client (Lua's unpack limit is ~8,000). */
export const MAX_SCRIPTED_VALUES = 7000;

/** What a `skip` code means, for the operator. */
export const SKIP_REASONS: Record<string, string> = {
  json: 'its fields are not a JSON array',
  pairs: 'its fields are not field/value pairs',
  strings: 'its fields are not all strings',
  empty: 'its fields hold nothing but replyTo/correlationId',
};
