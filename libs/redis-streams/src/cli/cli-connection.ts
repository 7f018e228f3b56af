import { describeConnection, resolveConnection } from '../options/connection.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { isCommandTimeout } from '../redis/replies/redis-errors.js';
import { openToolConnection } from '../redis/connection/tool-connection.js';
import { SERVER_DEFAULTS } from '../options/server-options.js';

/** The longest delay a Node timer takes (a longer one fires after 1 ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** The `--url` / `--cluster` / `--timeout-ms` flags every sub-command takes. */
export const CONNECTION_FLAGS = {
  url: { type: 'string' },
  cluster: { type: 'string' },
  'timeout-ms': { type: 'string', default: String(SERVER_DEFAULTS.commandTimeoutMs) },
} as const;

export const CONNECTION_HELP = `The URL defaults to $REDIS_URL, then redis://127.0.0.1:6379. On a Redis Cluster pass its nodes
instead: --cluster redis://host:port,redis://host:port (or $REDIS_CLUSTER_URLS). A command that gets no
answer within --timeout-ms (default ${SERVER_DEFAULTS.commandTimeoutMs}, a frozen or silent server) fails with exit 1.`;

type ConnectionFlags = { url?: string; cluster?: string; 'timeout-ms'?: string };

/** Where the flags (or the environment) say to connect, refused like the server's `connection` option when bad. */
function cliConnection(values: ConnectionFlags) {
  const clusterUrls = values.cluster ?? (values.url ? undefined : process.env.REDIS_CLUSTER_URLS);
  return resolveConnection(
    clusterUrls ? clusterUrls.split(',').map((u) => u.trim()) : (values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
  );
}

/**
 * Each command's deadline: ioredis waits for an answer forever, and a server that accepts the
 * connection but never answers (frozen, or not Redis) would hold the command with no word.
 */
const timeoutOf = (values: ConnectionFlags) =>
  positiveFlag('--timeout-ms', values['timeout-ms'] ?? String(SERVER_DEFAULTS.commandTimeoutMs), MAX_TIMER_MS);

/**
 * Connects as `--cluster`, `--url` or the environment say, and names the server (password masked)
 * and the cause when it cannot (redis/connection/tool-connection.ts).
 */
export async function connect(values: ConnectionFlags, { keepAlive = false } = {}): Promise<RedisConnection> {
  const timeoutMs = timeoutOf(values);
  return openToolConnection(cliConnection(values), { timeoutMs, keepAlive });
}

/**
 * Connects, runs `run`, disconnects. A command that got no answer in time says so, naming the server
 * and the deadline, where ioredis says only "Command timed out".
 */
export async function withConnection(values: ConnectionFlags, run: (redis: RedisConnection) => Promise<number>): Promise<number> {
  const redis = await connect(values);
  try {
    return await run(redis);
  } catch (err) {
    if (!timedOut(err)) throw err;
    // ioredis' own timeout, wherever in the chain: the message (names, counts) kept as it was, after what it means.
    const text = err instanceof Error ? err.message : String(err);
    const said = `no answer from ${describeConnection(cliConnection(values))} within ${timeoutOf(values)} ms`;
    throw new Error(isCommandTimeout(err) ? said : `${said} (${text})`, { cause: err });
  } finally {
    redis.disconnect();
  }
}

/** ioredis' commandTimeout expired on this error or one of its causes. */
function timedOut(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && depth < 5; e = (e as { cause?: unknown }).cause, depth++)
    if (isCommandTimeout(e)) return true;
  return false;
}

/** A wrong flag value or a missing argument: exit 2 with the usage, like parseArgs' own errors. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A positive whole number flag, at most `max`. */
export function positiveFlag(flag: string, raw: string | undefined, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(raw);
  if (raw === undefined || !Number.isSafeInteger(n) || n <= 0 || n > max)
    throw new UsageError(`${flag} must be a whole number from 1 to ${max}, got ${raw}`);
  return n;
}
