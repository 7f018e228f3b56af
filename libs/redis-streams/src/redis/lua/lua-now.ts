/** Redis' own clock in ms (TIME), as a function `redisNow()`: for a script that reads it only when it needs it. */
export const LUA_NOW_FN = `
local function redisNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/** Redis' own clock in ms, as `now`: every process reads one schedule, whatever its host's clock says. */
export const LUA_NOW = `${LUA_NOW_FN}
local now = redisNow()
`;
