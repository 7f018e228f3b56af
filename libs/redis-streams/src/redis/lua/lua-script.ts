import type { RedisConnection } from '../connection/connect.js';
import type { RawCommand } from '../produce/replication-wait.js';

/**
 * One Lua script of the transport, as every caller registers or sends it: the name ioredis defines it
 * under (EVALSHA, and the script itself once when Redis lacks it), how many of its arguments are keys
 * (undefined: the call says, for a script whose keys vary), and its source.
 */
export interface LuaScript {
  readonly name: string;
  readonly keys: number | undefined;
  readonly lua: string;
}

export const luaScript = (name: string, keys: number | undefined, lua: string): LuaScript => ({ name, keys, lua });

/** The one way a script is registered: each on `conn` under its name (ioredis keeps one definition per name). */
export function defineLuaScripts(conn: RedisConnection, scripts: readonly LuaScript[]): void {
  for (const { name, keys, lua } of scripts) conn.defineCommand(name, keys === undefined ? { lua } : { numberOfKeys: keys, lua });
}

/**
 * The script as a raw EVAL of its source (a durable write's: never re-sent by ioredis after NOSCRIPT). `keys`: how
 * many of `args` are keys, for a script whose count the call says; a script with a fixed count takes its own.
 */
export function rawEval(
  script: LuaScript,
  args: readonly (string | number | Buffer)[],
  keys: number | undefined = script.keys,
): RawCommand {
  if (keys === undefined) throw new Error(`${script.name}: a raw EVAL needs its key count`);
  return ['EVAL', script.lua, keys, ...args];
}
