import type { RedisConnection } from '../connection/connect.js';
import { defineLuaScripts, luaScript, rawEval, type LuaScript } from '../lua/lua-script.js';
import { LUA_XINFO } from '../lua/lua-xinfo.js';
import { ReplyShapeError } from '../replies/reply-shape-error.js';
import type { RawCommand } from './replication-wait.js';
import { idempotencyKeyOf } from '../../key-names.js';

/**
 * Idempotent appends: at most one entry per (producer id, key) in a stream's window. On Redis 8.6
 * `XADD … IDMP pid iid` (the server keeps the window, set per stream with XCFGSET); elsewhere one
 * script that keeps the first entry's id under a key of its own for the window (ADD_ONCE_SCRIPT).
 * Either way a repeat writes nothing and answers the first entry's id.
 */
export interface OnceWrite {
  producerId: string;
  /** The record's `idempotencyKey`. */
  key: string;
  windowSec: number;
  /** `XADD … IDMP` (the server has it); else the keyed-expiry script. */
  native: boolean;
  /** A field and value only this write carries (a request's correlation id): tells a first write from a repeat. */
  marker?: readonly [field: string, value: string];
  /** On a cluster the script's key must share the stream's slot. */
  onCluster: boolean;
}

/** An idempotent append's answer: the entry's id, and whether it was a repeat (undefined: not known, a plain XADD … IDMP). */
export interface OnceAppended {
  id: string;
  repeated?: boolean;
}

/**
 * Servers without IDMP. KEYS: the stream, the key's record (idempotencyKeyOf, key-names.ts). ARGV: the window (s),
 * then XADD's arguments after the key. Reading, appending and recording in one script: two
 * producers cannot both miss the record. Answers { id, 1 } for a new entry, { first id, 0 } for a repeat.
 */
export const ADD_ONCE_SCRIPT = `
local first = redis.call('GET', KEYS[2])
if first then return { first, 0 } end
local id = redis.call('XADD', KEYS[1], unpack(ARGV, 2))
redis.call('SET', KEYS[2], id, 'EX', ARGV[1])
return { id, 1 }
`;

/**
 * XADD … IDMP for a request: its answer does not say whether it was a repeat, the entry it names
 * does (a repeat names the first request's entry, which carries another correlation id). In one
 * script, so that no consumer can delete the entry in between. ARGV: the marker's field and
 * value, then XADD's arguments after the key.
 */
export const ADD_MARKED_SCRIPT = `
local id = redis.call('XADD', KEYS[1], unpack(ARGV, 3))
local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
if entry then
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == ARGV[1] then return { id, fields[i + 1] == ARGV[2] and 1 or 0 } end
  end
end
return { id, 0 }
`;

/**
 * A stream's IDMP window (Redis 8.6). XCFGSET needs the stream, and a change of its settings makes
 * Redis forget the ids it tracks: a stream that does not exist yet is made (an entry 0-1, trimmed at
 * once: no consumer sees it) and set before its first entry; one that has the settings already is
 * left alone. ARGV: duration (s), maxsize. Answers the settings it replaced, with the ids then
 * tracked, or false.
 */
export const IDMP_SETTINGS_SCRIPT = `${LUA_XINFO}
local key, duration, maxsize = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local before = false
if redis.call('EXISTS', key) == 0 then
  redis.call('XADD', key, 'MAXLEN', '0', '0-1', 'idmp', '')
else
  local s = record(redis.call('XINFO', 'STREAM', key))
  if s['idmp-duration'] == duration and s['idmp-maxsize'] == maxsize then return false end
  before = { s['idmp-duration'], s['idmp-maxsize'], s['iids-tracked'] }
end
redis.call('XCFGSET', key, 'IDMP-DURATION', duration, 'IDMP-MAXSIZE', maxsize)
return before
`;

const ADD_ONCE = luaScript('streamsAddOnce', 2, ADD_ONCE_SCRIPT);
const ADD_MARKED = luaScript('streamsAddMarked', 1, ADD_MARKED_SCRIPT);
const IDMP_SETTINGS = luaScript('streamsIdmpSettings', 1, IDMP_SETTINGS_SCRIPT);

/** The append scripts, for the producer's connection (defineLuaScripts). */
export const APPEND_SCRIPTS: readonly LuaScript[] = [ADD_ONCE, ADD_MARKED];

/** A command as ioredis sends it on a connection or a pipeline: XADD, or one of APPEND_SCRIPTS. */
export type AppendCommand = { command: 'XADD'; args: (string | number)[] } | { script: LuaScript; args: (string | number)[] };

/** The command that appends one entry: `xadd` is XADD's arguments after the key (trimming, id, fields). */
export function appendCommand(stream: string, xadd: readonly (string | number)[], once: OnceWrite | undefined): AppendCommand {
  if (!once) return { command: 'XADD', args: [stream, ...xadd] };
  if (!once.native)
    return {
      script: ADD_ONCE,
      args: [stream, idempotencyKeyOf(stream, once.producerId, once.key, once.onCluster), once.windowSec, ...xadd],
    };
  const idmp = [stream, 'IDMP', once.producerId, once.key, ...xadd];
  if (!once.marker) return { command: 'XADD', args: idmp };
  return { script: ADD_MARKED, args: [stream, once.marker[0], once.marker[1], ...idmp.slice(1)] };
}

/** `cmd` as sent raw: a script as EVAL of its source (a durable write's pipeline must never re-send one after NOSCRIPT). */
export function rawAppend(cmd: AppendCommand): RawCommand {
  if ('command' in cmd) return [cmd.command, ...cmd.args];
  return rawEval(cmd.script, cmd.args);
}

/** Sends `cmd` on a connection (its reply) or queues it on a pipeline. */
export function sendAppend<T>(target: RedisConnection | ReturnType<RedisConnection['pipeline']>, cmd: AppendCommand): T {
  if ('command' in cmd) return target.call(cmd.command, ...cmd.args) as T;
  return (target as unknown as Record<string, (...args: (string | number)[]) => T>)[cmd.script.name]!(...cmd.args);
}

/** What an append answered: XADD's id, or a script's { id, written }. */
export function parseAppended(reply: unknown, once: OnceWrite | undefined): OnceAppended {
  if (typeof reply === 'string' || Buffer.isBuffer(reply)) return { id: String(reply) };
  if (Array.isArray(reply) && reply.length === 2) return { id: String(reply[0]), repeated: Number(reply[1]) === 0 };
  throw new ReplyShapeError(once ? 'idempotent XADD' : 'XADD', reply);
}

/** A stream's IDMP settings as they were before this client set its own, and the ids Redis forgot. */
export interface ReplacedWindow {
  stream: string;
  windowSec: number;
  maxKeys: number;
  forgotten: number;
}

/**
 * Sets each stream's IDMP window once per connection (IDMP_SETTINGS_SCRIPT), before its first
 * idempotent write: `forget()` after a reconnect, which may be to another server (a failover, a
 * restart without data). Concurrent first writes of a stream share one call; a failed one is tried
 * again by the next write.
 */
export class IdmpWindows {
  private readonly set = new Map<string, Promise<void>>();

  constructor(
    private readonly conn: RedisConnection,
    private readonly window: { windowSec: number; maxKeys: number },
    /** A stream had other settings (another producer's, the server's defaults with ids tracked). */
    private readonly replaced: (before: ReplacedWindow) => void,
  ) {
    defineLuaScripts(conn, [IDMP_SETTINGS]);
  }

  ensure(stream: string): Promise<void> {
    let done = this.set.get(stream);
    if (!done) {
      done = this.apply(stream);
      this.set.set(stream, done);
      done.catch(() => this.set.get(stream) === done && this.set.delete(stream));
    }
    return done;
  }

  forget(): void {
    this.set.clear();
  }

  private async apply(stream: string): Promise<void> {
    const call = (this.conn as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[IDMP_SETTINGS.name]!;
    const before = await call.call(this.conn, stream, this.window.windowSec, this.window.maxKeys);
    if (before === null || before === false || before === 0) return;
    if (!Array.isArray(before) || before.length !== 3) throw new ReplyShapeError('XCFGSET', before);
    const [windowSec, maxKeys, forgotten] = before.map(Number) as [number, number, number];
    this.replaced({ stream, windowSec, maxKeys, forgotten });
  }
}
