import type { RedisConnection } from '../connection/connect.js';

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
