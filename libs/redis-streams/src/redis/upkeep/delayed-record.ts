/**
 * A delayed entry's record in its schedule's hash (`<stream>:delayed:entries`), as the client writes it:
 * the bytes `\0RSD1`, then strings, each its length in bytes in decimal, a `:`, and its bytes. The first
 * string says how the entry is appended once due: '' (a plain XADD), or under an idempotency key, 'n'
 * (`XADD … IDMP`) or 'f' (the keyed-expiry key); with a key four more follow: the producer id, the key, the
 * key's record (idempotencyKeyOf, key-names.ts) and the window in seconds. Then the entry's fields and values. Nothing is
 * escaped: a value costs its size plus a few bytes, where the JSON array of the first format doubled
 * every `"` and `\`. That format (a JSON array of field/value strings) is still read (docs/wire-format.md).
 */
export const RECORD_MAGIC = '\0RSD1';

/** How a due entry with an idempotency key is appended (see {@link RECORD_MAGIC}). */
export interface RecordOnce {
  /** `XADD … IDMP` where the producer's writes take it; else the keyed-expiry key alone. */
  native: boolean;
  producerId: string;
  key: string;
  /** Where the key's first entry id is kept (idempotencyKeyOf, key-names.ts). */
  idmpKey: string;
  windowSec: number;
}

/** The record of an entry with `fields` (each string as UTF-8: a lone surrogate becomes U+FFFD, as a plain XADD of it writes). */
export function encodeRecord(fields: readonly string[], once?: RecordOnce): Buffer {
  const head = once ? [once.native ? 'n' : 'f', once.producerId, once.key, once.idmpKey, String(once.windowSec)] : [''];
  const parts: Buffer[] = [Buffer.from(RECORD_MAGIC, 'latin1')];
  for (const item of [...head, ...fields]) {
    const bytes = Buffer.from(item, 'utf8');
    parts.push(Buffer.from(`${bytes.length}:`, 'latin1'), bytes);
  }
  return Buffer.concat(parts);
}

/**
 * Lua: `recordItems(value, most)` → the strings of a record in this format (at most `most` of them) and
 * whether they were all of it; nil when `value` is not one (the first format, or a raw producer's).
 */
export const LUA_RECORD_ITEMS = `
local function recordItems(value, most)
  if string.sub(value, 1, 5) ~= '\\0RSD1' then return nil end
  local items, pos, n = {}, 6, #value
  while pos <= n and #items < most do
    local a, b = string.find(value, '^%d+:', pos)
    if not a or b - a > 10 then return nil end
    local last = b + tonumber(string.sub(value, a, b - 1))
    if last > n then return nil end
    items[#items + 1] = string.sub(value, b + 1, last)
    pos = last + 1
  end
  return items, pos > n
end
`;
