/**
 * One beat of a partition's ownership (KEYS: owner, members, epoch counter; all in the stream's
 * slot). ARGV: consumer, the epoch it holds ('0': none), ttl ms, partition index. On Redis' clock:
 * the consumer is a live member until now + ttl; the live members, sorted by name, share the
 * partitions round-robin (partition p wants member p mod n). The owner key is `<epoch> <consumer>`
 * with ttl: held by this consumer at its epoch, it is renewed (and `2` says another member wants it:
 * finish and release); free and wanted here, it is taken with the next epoch (a fencing token: a
 * stale owner's acks name an epoch that is no longer the key's). The same name at another epoch
 * is this consumer's previous life (a restart): taken over when wanted, released when not.
 * Reply: {state (0 not owned, 1 owned, 2 owned and asked to release), epoch, members, owner value or ''}.
 */
export const OWNERSHIP_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, held, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], now + ttl, me)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('PEXPIRE', KEYS[2], ttl * 2)
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
table.sort(members)
local n = #members
local wanted = members[(tonumber(ARGV[4]) % n) + 1] == me
local owner = redis.call('GET', KEYS[1])
if owner then
  local epoch, name = string.match(owner, '^(%d+) (.*)$')
  if owner == held .. ' ' .. me then
    redis.call('PEXPIRE', KEYS[1], ttl)
    if wanted then return {1, tonumber(held), n, owner} end
    return {2, tonumber(held), n, owner}
  end
  if name ~= me or held ~= '0' then return {0, 0, n, owner} end
  if not wanted then
    redis.call('DEL', KEYS[1])
    return {0, 0, n, ''}
  end
elseif not wanted then
  return {0, 0, n, ''}
end
local epoch = redis.call('INCR', KEYS[3])
local value = epoch .. ' ' .. me
redis.call('SET', KEYS[1], value, 'PX', ttl)
return {1, epoch, n, value}
`;

/** Releases a partition held at an epoch (KEYS: owner, members; ARGV: consumer, epoch, leaving '1'/'0'); leaving also ends the membership. */
export const RELEASE_OWNERSHIP_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[2] .. ' ' .. ARGV[1] then redis.call('DEL', KEYS[1]) end
if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
`;

/**
 * XACK (or XACKDEL with ARGV[3] its policy) of ids of a partition held at an epoch (KEYS: owner,
 * stream; ARGV: group, '<epoch> <consumer>', policy or '', ids…): a stale owner's ack is refused,
 * its entries stay pending for the owner that fenced it out.
 */
export const FENCED_ACK_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return redis.error_reply('FENCED this consumer no longer owns the partition at epoch ' .. string.match(ARGV[2], '^%d+')) end
if ARGV[3] == '' then return redis.call('XACK', KEYS[2], ARGV[1], unpack(ARGV, 4)) end
return redis.call('XACKDEL', KEYS[2], ARGV[1], ARGV[3], 'IDS', #ARGV - 3, unpack(ARGV, 4))
`;
