/**
 * Stream id arithmetic for scripts, on decimal strings: a millisecond part above 2^53 (any
 * producer may XADD an explicit id) or a sequence near 2^64 would lose digits as a Lua number.
 * less(a, b); after(id) / before(id): the next / previous possible id, nil past either end.
 */
export const LUA_IDS = `
local MAXPART = '18446744073709551615'
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return (ms:gsub('^0+(%d)', '%1')), (seq:gsub('^0+(%d)', '%1'))
end
local function numless(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  if am ~= bm then return numless(am, bm) end
  return numless(as, bs)
end
local function incr(n)
  local i = #n
  while i > 0 and n:sub(i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #n) end
  return n:sub(1, i - 1) .. string.char(n:byte(i) + 1) .. string.rep('0', #n - i)
end
local function decr(n)
  local i = #n
  while i > 0 and n:sub(i, i) == '0' do i = i - 1 end
  local out = n:sub(1, i - 1) .. string.char(n:byte(i) - 1) .. string.rep('9', #n - i)
  return (out:gsub('^0+(%d)', '%1'))
end
local function after(id)
  local ms, seq = parse(id)
  if seq ~= MAXPART then return ms .. '-' .. incr(seq) end
  if ms ~= MAXPART then return incr(ms) .. '-0' end
  return nil
end
local function before(id)
  local ms, seq = parse(id)
  if seq ~= '0' then return ms .. '-' .. decr(seq) end
  if ms ~= '0' then return decr(ms) .. '-' .. MAXPART end
  return nil
end
`;
