import { createHash } from 'node:crypto';
import { hashTagOf, slotOf } from './slots.js';

/**
 * Every key the library derives from a user's name, in one place (docs/wire-format.md, "Keys the
 * library derives", has the scheme and why no two derivations meet).
 *
 * A derived key is `<base>:<kind>[:<part>…]`: the base is a stream key or a pattern's name (keyPrefix +
 * pattern) as it is, the kind a fixed word, each part (a group, a producer id, a key) escaped so that it
 * holds no `:`, `{`, `}` and is no kind word. Read from the right, the key parses one way only. On a
 * cluster the base is written in its own slot (`{orders}:retry:g`); see clusterBase.
 */

/** The kinds of derived keys: their fixed words and how many escaped parts follow. */
export const KEY_KINDS = {
  /** A stream's default dead-letter stream. */
  dead: { words: ['dead'], parts: 0 },
  /** A stream's schedule of delayed entries (sorted set) and their fields (hash). */
  delayed: { words: ['delayed'], parts: 0 },
  delayedEntries: { words: ['delayed', 'entries'], parts: 0 },
  /**
   * A stream's repeatable schedules: their records (hash: id → record), their next fire times (sorted set: id →
   * Unix ms) and each one's last fire handed to the delayed schedule (hash: id → Unix ms). Under the word
   * `delayed` (the path they feed): no new first word, so no part that was written as it is changes its escape.
   */
  schedules: { words: ['delayed', 'schedules'], parts: 0 },
  schedulesNext: { words: ['delayed', 'schedules', 'next'], parts: 0 },
  schedulesFired: { words: ['delayed', 'schedules', 'fired'], parts: 0 },
  /** A group's retry schedule on a stream. */
  retry: { words: ['retry'], parts: 1 },
  /** An ordered partition's ownership for a group. */
  owner: { words: ['owner'], parts: 1 },
  members: { words: ['members'], parts: 1 },
  epoch: { words: ['epoch'], parts: 1 },
  /** What an ordered partition's owner says of its durable acks (expiring with its lease). */
  durability: { words: ['durability'], parts: 1 },
  /** Consumer clean-up's lock (per group) and the CLI's prune lock (per run). */
  cleanup: { words: ['cleanup'], parts: 1 },
  prune: { words: ['prune'], parts: 1 },
  /** A stream's pause flag for a group (no slot: workers ask EXISTS of it alone). */
  paused: { words: ['paused'], parts: 1 },
  /** A pattern's rate limit for a group: its window, and the block a RateLimitedException sets. */
  rate: { words: ['rate'], parts: 1 },
  ratelimited: { words: ['ratelimited'], parts: 1 },
  /**
   * What a pattern's workers publish of its limit for a group (hash: max, perMs, perKey; expiring), and the keys a
   * per-key limit holds back now (sorted set: key → until when). Under the word `rate`: no new first word, so no
   * part that was written as it is changes its escape.
   */
  rateRecord: { words: ['rate', 'limit'], parts: 1 },
  rateHeld: { words: ['rate', 'held'], parts: 1 },
  /** One key's rate limit (group, key). */
  keyrate: { words: ['keyrate'], parts: 2 },
  keyratelimited: { words: ['keyratelimited'], parts: 2 },
  /** A priority level's stream of a stream (the level, 1 to 9; level 0 is the stream itself). */
  prio: { words: ['prio'], parts: 1 },
  /** One key's slots of a fair group (group, key): its entries in hand, with their leases (a rare word: a group or key named so is escaped). */
  inhand: { words: ['inhand'], parts: 2 },
  /** The idempotent-write fallback's record (producer id, idempotency key). */
  idmp: { words: ['idmp'], parts: 2 },
} as const satisfies Record<string, { words: readonly string[]; parts: number }>;

export type KeyKind = keyof typeof KEY_KINDS;

/** The first word of every kind: a part equal to one is escaped, so that no part reads as a kind. */
const KIND_WORDS: ReadonlySet<string> = new Set(Object.values(KEY_KINDS).map((k) => k.words[0]));

/** `value` with each lone surrogate made U+FFFD (String.prototype.toWellFormed, ES2024). */
const wellFormed = (value: string): string =>
  value.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

/**
 * A user-supplied part of a key (a group, a producer id, a key): `%`, `:`, `{` and `}` percent-encoded
 * (`%25`, `%3A`, `%7B`, `%7D`), and a part equal to a kind word has its first letter encoded (`dead` →
 * `%64ead`). Anything else stays as it is (a group `billing` is `billing`). Lone surrogates become
 * U+FFFD, as they do on their way to Redis (UTF-8): the part is named as Redis names it.
 */
export function escapePart(part: string): string {
  const escaped = wellFormed(part).replace(/[%:{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return KIND_WORDS.has(escaped) ? `%${escaped.charCodeAt(0).toString(16).toUpperCase()}${escaped.slice(1)}` : escaped;
}

/** The tail of a key after its base: the kind's words and its parts (escaped already), `:`-joined. */
function tailOf(kind: KeyKind, escaped: readonly string[]): string {
  const spec = KEY_KINDS[kind];
  if (escaped.length !== spec.parts) throw new Error(`key kind ${kind} takes ${spec.parts} parts, got ${escaped.length}`);
  return [...spec.words, ...escaped].join(':');
}

/** A name that ends in `:<digits>`, as the library's partitions do (`{orders:3}`). */
const ENDS_IN_INDEX = /:\d+$/;

/**
 * How a base is written on a cluster, so that its keys share its slot and no two bases meet:
 * - `verbatim`: a name with a hash tag keeps it (`app:{orders:3}:retry:g`);
 * - `wrapped`: a name without braces becomes the tag (`{orders}:retry:g`);
 * - `marked`: `{X}` is both an untagged `X` wrapped and a stream named `{X}`; one of the two gives it up
 *   and writes `/` after the tag instead of `:` (`{orders}/retry:g`): the stream named `{X}` unless X ends in
 *   `:<digits>` (the library's own partitions `{orders:3}` keep theirs), else the untagged `X` (`jobs:42`);
 * - `searched`: a name whose braces allow no tag (`a}b`, `x{}y`, or empty) gets `<name>:<tail>:<n>`, the
 *   first n that hashes to its slot.
 */
type ClusterForm = 'verbatim' | 'wrapped' | 'marked' | 'searched';

function clusterFormOf(name: string): ClusterForm {
  const tag = hashTagOf(name);
  if (tag !== undefined) return name === `{${tag}}` && !ENDS_IN_INDEX.test(tag) ? 'marked' : 'verbatim';
  if (name === '' || name.includes('}')) return 'searched';
  return ENDS_IN_INDEX.test(name) ? 'marked' : 'wrapped';
}

/** Most tries of a slot search: 16384 slots make a hit within a few tens of thousands. */
const SEARCH_LIMIT = 1_000_000;
const searched = new Map<string, string>();

/** `<name>:<tail>:<n>` in `name`'s slot (a name whose braces allow no tag: hashed whole, so no tag can carry its slot). */
function searchedKey(name: string, tail: string): string {
  const head = `${name}:${tail}`;
  const cached = searched.get(head);
  if (cached !== undefined) return cached;
  const slot = slotOf(name);
  for (let n = 0; n < SEARCH_LIMIT; n++) {
    const candidate = `${head}:${n}`;
    if (slotOf(candidate) !== slot) continue;
    if (searched.size >= 10_000) searched.clear();
    searched.set(head, candidate);
    return candidate;
  }
  throw new Error(`no key "${head}:<n>" in the slot of "${name}"`);
}

/**
 * The key of `kind` for `base` (a stream key, or a pattern's name for `rate`, `keyrate` and their
 * blocks) and its parts. `onCluster`: in `base`'s slot (every kind but `paused`, which no script
 * reads beside its stream).
 */
export function derivedKey(kind: KeyKind, base: string, parts: readonly string[], onCluster: boolean): string {
  return keyWithTail(kind, base, tailOf(kind, parts.map(escapePart)), onCluster);
}

function keyWithTail(kind: KeyKind, base: string, tail: string, onCluster: boolean): string {
  if (!onCluster || kind === 'paused') return `${base}:${tail}`;
  switch (clusterFormOf(base)) {
    case 'verbatim':
      return `${base}:${tail}`;
    case 'wrapped':
      return `{${base}}:${tail}`;
    case 'marked':
      return `${hashTagOf(base) === undefined ? `{${base}}` : base}/${tail}`;
    case 'searched':
      return searchedKey(base, tail);
  }
}

/** A stream's default dead-letter stream: `orders:dead`; on a cluster `{orders}:dead` (its slot: the move and its XACK are one script). */
export function deadLetterKeyOf(stream: string, onCluster: boolean): string {
  return derivedKey('dead', stream, [], onCluster);
}

/** Both default dead-letter names of `stream` (one node's, a cluster's), for tools that do not know which they face. */
export function deadLetterNamesOf(stream: string): string[] {
  return [...new Set([deadLetterKeyOf(stream, false), deadLetterKeyOf(stream, true)])];
}

/**
 * The streams whose default dead-letter stream is `dead`, on one node or a cluster: the inverse of
 * deadLetterKeyOf, from the key alone (never from a letter's content). Empty for any other key (a
 * custom `deadLetterStream`).
 */
export function deadLetterSourcesOf(dead: string): string[] {
  const candidates = new Set<string>();
  const plain = /^(.+):dead$/s.exec(dead)?.[1];
  if (plain !== undefined) candidates.add(plain);
  const inTag = /^\{([^}]+)\}[:/]dead$/s.exec(dead)?.[1];
  if (inTag !== undefined) candidates.add(inTag).add(`{${inTag}}`);
  const found = /^(.*):dead:\d+$/s.exec(dead)?.[1];
  if (found !== undefined) candidates.add(found);
  return [...candidates].filter((s) => deadLetterNamesOf(s).includes(dead));
}

/**
 * The SCAN patterns that find the default dead-letter streams of the streams `match` finds, beside
 * `match` itself: on a cluster an untagged stream's are `{<stream>}:dead` (or `{<stream>}/dead`).
 */
export function deadLetterScansOf(match: string): string[] {
  return [`{${match}}:dead`, `{${match}}/dead`];
}

/** The retry set of `group` on `stream`: `orders:retry:<group>` (each group keeps its own schedule). */
export function retryKeyOf(stream: string, group: string, onCluster: boolean): string {
  return derivedKey('retry', stream, [group], onCluster);
}

/** The keys of a stream's delayed entries (per stream, not per group: an entry becomes visible to every group at once). */
export interface DelayedKeys {
  /** Sorted set: id → due time (Unix ms, Redis' clock). */
  schedule: string;
  /** Hash: id → the entry's record (delayed-record.ts; the first format, a JSON array of field/value strings, is still read). */
  entries: string;
}

/** `orders:delayed` and `orders:delayed:entries` (on a cluster in the stream's slot: `{orders}:delayed` …). */
export function delayedKeysOf(stream: string, onCluster: boolean): DelayedKeys {
  return { schedule: derivedKey('delayed', stream, [], onCluster), entries: derivedKey('delayedEntries', stream, [], onCluster) };
}

/** The keys of a stream's repeatable schedules (schedule-commands.ts), in the stream's slot: one script fires into its delayed keys. */
export interface ScheduleKeys {
  /** Hash: schedule id → its record (JSON, schedule-record.ts). */
  records: string;
  /** Sorted set: schedule id → its next fire time (Unix ms, Redis' clock). */
  next: string;
  /** Hash: schedule id → its last fire handed to the delayed schedule (Unix ms): an update never fires it again. */
  fired: string;
}

/** `orders:delayed:schedules`, `orders:delayed:schedules:next`, `orders:delayed:schedules:fired` (on a cluster `{orders}:delayed:schedules` …). */
export function scheduleKeysOf(stream: string, onCluster: boolean): ScheduleKeys {
  return {
    records: derivedKey('schedules', stream, [], onCluster),
    next: derivedKey('schedulesNext', stream, [], onCluster),
    fired: derivedKey('schedulesFired', stream, [], onCluster),
  };
}

/** The keys of a partition's ownership for one group, in the stream's slot (the fenced ack touches both). */
export interface OwnershipKeys {
  /** `<epoch> <token> <consumer>`, expiring: who reads the partition now (the token: which process). */
  owner: string;
  /** Live members of the group on this partition (sorted set, score: until when, on Redis' clock). */
  members: string;
  /** The epoch counter (never expires: an epoch is never given twice). */
  epoch: string;
  /** What the owner says of its durable acks (see DurableOwnershipCommands), expiring with the lease. */
  durability: string;
}

/** `orders:owner:<group>`, `orders:members:<group>`, `orders:epoch:<group>`, `orders:durability:<group>` (on a cluster in the stream's slot). */
export function ownershipKeysOf(stream: string, group: string, onCluster: boolean): OwnershipKeys {
  return {
    owner: derivedKey('owner', stream, [group], onCluster),
    members: derivedKey('members', stream, [group], onCluster),
    epoch: derivedKey('epoch', stream, [group], onCluster),
    durability: derivedKey('durability', stream, [group], onCluster),
  };
}

/** Consumer clean-up's lock of `group` on `stream` (one script names it and the stream: their slot). */
export function cleanupLockOf(stream: string, group: string, onCluster: boolean): string {
  return derivedKey('cleanup', stream, [group], onCluster);
}

/** An operator's prune lock on `stream`, named by a token of its own (no worker's lock, no key of the user's). */
export function pruneLockOf(stream: string, token: string, onCluster: boolean): string {
  return derivedKey('prune', stream, [token], onCluster);
}

/** The pause flag of `stream` for `group`: `orders:paused:<group>`. Its existence is the pause; each stream key has its own. */
export function pauseKeyOf(stream: string, group: string): string {
  return derivedKey('paused', stream, [group], false);
}

/** A pattern's limit for one group: its window of grants, and the block a handler's RateLimitedException sets. */
export interface RateLimitKeys {
  window: string;
  block: string;
}

/** `<name>:rate:<group>` and `<name>:ratelimited:<group>` (`name`: keyPrefix + pattern); on a cluster in one slot (`{name}:rate:…`). */
export function rateLimitKeysOf(name: string, group: string, onCluster: boolean): RateLimitKeys {
  return { window: derivedKey('rate', name, [group], onCluster), block: derivedKey('ratelimited', name, [group], onCluster) };
}

/** What the dashboard reads of a pattern's limit for one group, beside its window and block (RateLimitKeys). */
export interface RateLimitStateKeys {
  /** Hash `max`, `perMs`, `perKey` (`1`/`0`), written by the workers that run the limit, expiring unless renewed. */
  record: string;
  /** Sorted set: a key a per-key limit refused (named as in its keyrate keys) → until when it is held (Redis ms). */
  held: string;
}

/** `<name>:rate:limit:<group>` and `<name>:rate:held:<group>`, in the name's slot (with its keyrate keys: one script writes both). */
export function rateLimitStateKeysOf(name: string, group: string, onCluster: boolean): RateLimitStateKeys {
  return { record: derivedKey('rateRecord', name, [group], onCluster), held: derivedKey('rateHeld', name, [group], onCluster) };
}

/** Most characters of a rate-limit key kept in its Redis key names: a longer one is named by its hash. */
const MAX_KEY_CHARS = 200;

/**
 * A key as a part of a rate-limit key name: escaped, or `%#<sha-256>` when longer than MAX_KEY_CHARS
 * or not well-formed (a lone surrogate, from a key function: hashed as the UTF-16 it is, so that no
 * two keys share a name). An escaped part never holds `%#` (its `%` is followed by two hex digits).
 */
function limitKeyPart(key: string): string {
  if (key.length <= MAX_KEY_CHARS && wellFormed(key) === key) return escapePart(key);
  return `%#${createHash('sha256').update(Buffer.from(key, 'utf16le')).digest('hex').slice(0, 32)}`;
}

/** A key as its keyrate keys name it (escaped, or `%#<sha-256>` when long): a member of the held set (RateLimitStateKeys). */
export function heldKeyMemberOf(key: string): string {
  return limitKeyPart(key);
}

/** One key's limit of a pattern (`rateLimit.perKey`): `<name>:keyrate:<group>:<key>` and `<name>:keyratelimited:<group>:<key>`. */
export function keyRateLimitKeysOf(name: string, group: string, key: string, onCluster: boolean): RateLimitKeys {
  const parts = [escapePart(group), limitKeyPart(key)];
  return {
    window: keyWithTail('keyrate', name, tailOf('keyrate', parts), onCluster),
    block: keyWithTail('keyratelimited', name, tailOf('keyratelimited', parts), onCluster),
  };
}

/**
 * The stream of priority `level` of `stream` (`priorities`): the stream itself for level 0, else `<stream>:prio:<level>`,
 * on a cluster in the stream's slot (`{orders}:prio:2`), so that one read takes every level.
 */
export function priorityStreamOf(stream: string, level: number, onCluster: boolean): string {
  return level === 0 ? stream : derivedKey('prio', stream, [String(level)], onCluster);
}

/**
 * One key's slots of a fair pattern for a group (`fair`): `<name>:inhand:<group>:<key>`, a sorted set of the
 * entries of that key in hand (score: until when, on Redis' clock). On a cluster in the name's slot (`{name}:inhand:…`),
 * so one script takes the slots of many keys. A key is named as a rate limit's is (escaped, or hashed when long).
 */
export function fairSlotKeyOf(name: string, group: string, key: string, onCluster: boolean): string {
  return keyWithTail('inhand', name, tailOf('inhand', [escapePart(group), limitKeyPart(key)]), onCluster);
}

/** Where the idempotent-write fallback keeps a key's first entry id: `<stream>:idmp:<producerId>:<key>`, in the stream's slot. */
export function idempotencyKeyOf(stream: string, producerId: string, key: string, onCluster: boolean): string {
  return derivedKey('idmp', stream, [producerId, key], onCluster);
}

/**
 * What every idempotencyKeyOf(stream, …) begins with (`orders:idmp:`, `{orders}:idmp:` …): a delayed entry's
 * record names its key's record, and a worker takes only one of its own stream (isOwnIdempotencyKey), so that
 * a forged record cannot make it write another key.
 */
export function idempotencyKeyPrefixOf(stream: string, onCluster: boolean): string {
  if (!onCluster) return `${stream}:idmp:`;
  switch (clusterFormOf(stream)) {
    case 'verbatim':
    case 'searched':
      return `${stream}:idmp:`;
    case 'wrapped':
      return `{${stream}}:idmp:`;
    case 'marked':
      return `${hashTagOf(stream) === undefined ? `{${stream}}` : stream}/idmp:`;
  }
}

/**
 * Whether `key` is an idempotency record of the stream whose prefix (idempotencyKeyPrefixOf) is `prefix`: the
 * prefix, then two escaped parts (no `:` or brace, no kind word), and maybe a slot search's `:<n>`. Its tail is
 * then `idmp:<producer id>:<key>`, which no key of another kind or stream has (docs/wire-format.md).
 * LUA_OWN_IDEMPOTENCY_KEY is the same check in the delayed scripts.
 */
export function isOwnIdempotencyKey(prefix: string, key: string): boolean {
  if (prefix === '' || !key.startsWith(prefix)) return false;
  const parts = /^([^:{}]*):([^:{}]*)(?::\d+)?$/.exec(key.slice(prefix.length));
  return parts !== null && !KIND_WORDS.has(parts[1]!) && !KIND_WORDS.has(parts[2]!);
}

/** isOwnIdempotencyKey in Lua (its patterns: `{`, `}` are no magic characters there). */
export const LUA_OWN_IDEMPOTENCY_KEY = `
local kindWords = { ${[...KIND_WORDS].map((w) => `['${w}'] = true`).join(', ')} }
local function ownIdempotencyKey(prefix, key)
  if prefix == '' or string.sub(key, 1, #prefix) ~= prefix then return false end
  local rest = string.sub(key, #prefix + 1)
  local a, b = string.match(rest, '^([^:{}]*):([^:{}]*)$')
  if not a then a, b = string.match(rest, '^([^:{}]*):([^:{}]*):%d+$') end
  return a ~= nil and not kindWords[a] and not kindWords[b]
end
`;
