/**
 * XINFO replies for scripts, read in one place: rows are flat field/value lists (scripts always
 * get RESP2 shapes). record(row) → table; groupOf(key, group) → its row or nil; listsConsumer(key,
 * group, name) → whether the group lists that consumer.
 */
export const LUA_XINFO = `
local function record(row)
  local t = {}
  for i = 1, #row, 2 do t[row[i]] = row[i + 1] end
  return t
end
local function groupOf(key, group)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local r = record(g)
    if r['name'] == group then return r end
  end
  return nil
end
local function listsConsumer(key, group, name)
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', key, group)) do
    if record(c)['name'] == name then return true end
  end
  return false
end
`;
