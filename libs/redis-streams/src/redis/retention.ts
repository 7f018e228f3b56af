import { InvalidOptionError, positiveInt, rejectUnknown } from '../options/validate.js';

/**
 * How much of a stream a producer keeps. Trimming happens on every `emit`/`send` to the stream.
 * Without `safe`, trimming is plain `XADD … MAXLEN ~` / `MINID ~`: it can delete entries a group
 * has not read or acked yet. With `safe`, it never removes an entry that any group still needs.
 */
export interface RetentionPolicy {
  /** Keep about this many entries (`MAXLEN ~`). */
  maxLen?: number;
  /** Keep entries younger than this (`MINID ~ <now - maxAgeMs>`). */
  maxAgeMs?: number;
  /** Never trim entries some group has not acked, nor entries no group has read yet. Default: false. */
  safe?: boolean;
}

export function validateRetention(option: string, value: unknown): RetentionPolicy | undefined {
  if (value === undefined) return undefined;
  rejectUnknown(value as object, ['maxLen', 'maxAgeMs', 'safe'], `${option}.`);
  const policy = value as RetentionPolicy;
  if (policy.maxLen === undefined && policy.maxAgeMs === undefined) {
    throw new InvalidOptionError(option, 'set maxLen, maxAgeMs or both');
  }
  if (policy.safe !== undefined && typeof policy.safe !== 'boolean') throw new InvalidOptionError(`${option}.safe`, 'must be a boolean');
  return {
    ...(policy.maxLen !== undefined ? { maxLen: positiveInt(`${option}.maxLen`, policy.maxLen, 0) } : {}),
    ...(policy.maxAgeMs !== undefined ? { maxAgeMs: positiveInt(`${option}.maxAgeMs`, policy.maxAgeMs, 0) } : {}),
    safe: policy.safe ?? false,
  };
}

/** `XADD` trim arguments of an unsafe policy (one bound only: `MAXLEN` and `MINID` exclude each other). */
export function xaddTrimArgs(policy: RetentionPolicy | undefined, now: number): (string | number)[] {
  if (!policy || policy.safe) return [];
  if (policy.maxAgeMs !== undefined && policy.maxLen === undefined) return ['MINID', '~', `${now - policy.maxAgeMs}-0`];
  if (policy.maxLen !== undefined && policy.maxAgeMs === undefined) return ['MAXLEN', '~', policy.maxLen];
  return [];
}

/**
 * Trims a stream to its policy bound, never past what a group still needs: its oldest pending
 * entry and everything after its last-delivered id. Atomic, so a group cannot move between
 * reading the bound and trimming. Also used for unsafe policies that set both maxLen and maxAgeMs.
 * KEYS[1] stream; ARGV[1] maxLen (0: none); ARGV[2] age bound id ('': none); ARGV[3] '1' = safe;
 * ARGV[4] most entries examined per call. Returns the number of entries removed.
 */
export const TRIM_SCRIPT = `
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local function after(id)
  local ms, seq = parse(id)
  return string.format('%.0f-%.0f', ms, seq + 1)
end
local key = KEYS[1]
local maxLen = tonumber(ARGV[1])
local bound = nil
if maxLen > 0 then
  local excess = redis.call('XLEN', key) - maxLen
  if excess > 0 then
    local old = redis.call('XRANGE', key, '-', '+', 'COUNT', math.min(excess, tonumber(ARGV[4])))
    bound = after(old[#old][1])
  end
end
if ARGV[2] ~= '' and (bound == nil or less(bound, ARGV[2])) then bound = ARGV[2] end
if bound == nil then return 0 end
if ARGV[3] == '1' then
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local info = {}
    for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
    local keep = after(info['last-delivered-id'])
    if tonumber(info['pending']) > 0 then
      local oldest = redis.call('XPENDING', key, info['name'])[2]
      if less(oldest, keep) then keep = oldest end
    end
    if less(keep, bound) then bound = keep end
  end
end
return redis.call('XTRIM', key, 'MINID', '~', bound)
`;

/** Most entries the trim script looks at in one call: trimming a large backlog takes several writes. */
export const TRIM_SCAN_LIMIT = 10_000;
