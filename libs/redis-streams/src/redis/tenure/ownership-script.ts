import { LUA_NOW } from '../lua/lua-now.js';
import { luaScript } from '../lua/lua-script.js';
/**
 * One beat of a partition's ownership (KEYS: owner, members, epoch counter, durability state; all in
 * the stream's slot). ARGV: consumer, the owner value it holds ('' for none), ttl ms, partition index,
 * this process' token, and what the owner says of its durable acks ('' for nothing: see
 * DurableOwnershipCommands), kept beside the owner key for inspect and the dashboard while it owns. On Redis' clock: the consumer is a live member until now + ttl; the live members,
 * sorted by name, share the partitions round-robin (partition p wants member p mod n). The owner key
 * is `<epoch> <token> <consumer>` with ttl: held by this process, it is renewed (and `2` says another
 * member wants it: finish and release); free and wanted here, it is taken with the next epoch (a
 * fencing token: a stale owner's acks name a value that is no longer the key's). A value of another
 * process is left to expire, even under this consumer's name: a restart, or a second live process
 * given the same name, which must not take the partition from the first.
 * Reply: {state (0 not owned, 1 owned, 2 owned and asked to release), epoch, members, owner value or ''}.
 */
export const OWNERSHIP_SCRIPT = `${LUA_NOW}local me, held, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], now + ttl, me)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('PEXPIRE', KEYS[2], ttl * 2)
local members = redis.call('ZRANGE', KEYS[2], 0, -1)
table.sort(members)
local n = #members
local wanted = members[(tonumber(ARGV[4]) % n) + 1] == me
local owner = redis.call('GET', KEYS[1])
if owner then
  if owner ~= held then return {0, 0, n, owner} end
  local epoch = tonumber(string.match(owner, '^%d+'))
  redis.call('PEXPIRE', KEYS[1], ttl)
  if ARGV[6] ~= '' then redis.call('SET', KEYS[4], ARGV[6], 'PX', ttl) end
  if wanted then return {1, epoch, n, owner} end
  return {2, epoch, n, owner}
end
if not wanted then return {0, 0, n, ''} end
local value = redis.call('INCR', KEYS[3]) .. ' ' .. ARGV[5] .. ' ' .. me
redis.call('SET', KEYS[1], value, 'PX', ttl)
if ARGV[6] ~= '' then redis.call('SET', KEYS[4], ARGV[6], 'PX', ttl) else redis.call('DEL', KEYS[4]) end
return {1, tonumber(string.match(value, '^%d+')), n, value}
`;

/** Releases a partition held with an owner value (KEYS: owner, members; ARGV: consumer, value or '', leaving '1'/'0'); leaving also ends the membership. */
export const RELEASE_OWNERSHIP_SCRIPT = `
if ARGV[2] ~= '' and redis.call('GET', KEYS[1]) == ARGV[2] then redis.call('DEL', KEYS[1]) end
if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
`;

/**
 * XACK (or XACKDEL with ARGV[3] its policy) of ids of a partition held with an owner value (KEYS:
 * owner, stream; ARGV: group, `<epoch> <token> <consumer>`, policy or '', ids…): a stale owner's ack
 * is refused, its entries stay pending for the owner that fenced it out.
 */
export const FENCED_ACK_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return redis.error_reply('FENCED this consumer no longer owns the partition at epoch ' .. (string.match(ARGV[2], '^%d+') or '(none)')) end
if ARGV[3] == '' then return redis.call('XACK', KEYS[2], ARGV[1], unpack(ARGV, 4)) end
return redis.call('XACKDEL', KEYS[2], ARGV[1], ARGV[3], 'IDS', #ARGV - 3, unpack(ARGV, 4))
`;

/**
 * Whether what an ordered owner settled without an ack of its own (a dead-letter move, sent on
 * another connection) is settled on the master that answers now (KEYS: owner, stream; ARGV: group,
 * `<epoch> <token> <consumer>`, ttl ms, ids…), renewing the lease as it looks: the renewal is a write
 * of this connection, so the WAIT sent after it covers everything that master took before it. A
 * move lost with a master that failed is pending again here, and comes back in the reply, never
 * confirmed. Reply: the ids still pending; FENCED when the partition is another owner's.
 */
export const CONFIRM_SETTLED_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return redis.error_reply('FENCED this consumer no longer owns the partition at epoch ' .. (string.match(ARGV[2], '^%d+') or '(none)')) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
local pending = {}
for i = 4, #ARGV do
  if #redis.call('XPENDING', KEYS[2], ARGV[1], ARGV[i], ARGV[i], 1) > 0 then pending[#pending + 1] = ARGV[i] end
end
return pending
`;

/** The partition's scripts as every caller registers or sends them (the loop's connection, the durable lane's EVAL). */
export const OWNERSHIP = luaScript('streamsOwnership', 4, OWNERSHIP_SCRIPT);
export const RELEASE_OWNERSHIP = luaScript('streamsReleaseOwnership', 2, RELEASE_OWNERSHIP_SCRIPT);
export const FENCED_ACK = luaScript('streamsFencedAck', 2, FENCED_ACK_SCRIPT);
export const CONFIRM_SETTLED = luaScript('streamsConfirmSettled', 2, CONFIRM_SETTLED_SCRIPT);
