/** Redis' own clock in ms (TIME), as `now`: every process reads one schedule, whatever its host's clock says. */
export const LUA_NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;
