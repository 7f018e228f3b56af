import { Cluster, Redis } from 'ioredis';
import { describeError } from '../describe-error.js';
import { describeConnection, isCluster, resolveConnection } from '../options/connection.js';
import type { RedisConnection } from '../redis/connect.js';
import { explainConnectionError, isCommandTimeout, isNotRedis } from '../redis/redis-errors.js';
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

/** A long-running command's reconnect backoff (the dashboard): a dropped connection comes back; one-shot commands fail at once. */
const reconnect = (tries: number): number => Math.min(tries * 200, 2_000);

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
 * and the cause when it cannot.
 */
export async function connect(values: ConnectionFlags, { keepAlive = false } = {}): Promise<RedisConnection> {
  const timeoutMs = timeoutOf(values);
  const connection = cliConnection(values);
  const redis = isCluster(connection)
    ? new Cluster(connection.cluster, {
        ...connection.options,
        lazyConnect: true,
        clusterRetryStrategy: keepAlive ? reconnect : () => null,
        redisOptions: { ...connection.options.redisOptions, maxRetriesPerRequest: 1, commandTimeout: timeoutMs },
      })
    : new Redis({
        ...connection,
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        commandTimeout: timeoutMs,
        retryStrategy: keepAlive ? reconnect : () => null,
      });
  // ioredis rejects connect() with "Connection is closed."; the reason came as an 'error' event.
  let cause: unknown;
  // A reply that was no RESP says what is wrong; the reset that follows it (ECONNRESET, EPIPE) does not.
  redis.on('error', (err: unknown) => (cause = isNotRedis(cause) ? cause : err));
  const failure = (err: unknown) => {
    const found = nodeCause(cause) ?? err;
    const reason = found instanceof Error ? explainConnectionError(slammedShut(found)) : found;
    const said = isCommandTimeout(reason) ? `no answer within ${timeoutMs} ms` : describeError(reason);
    return new Error(`cannot connect to ${describeConnection(connection)}: ${said}`);
  };
  try {
    // A Cluster whose ready check timed out (a frozen node) ends without settling connect(): its end settles it.
    await new Promise<void>((resolve, reject) => {
      redis.once('end', () =>
        reject(new Error(`the connection ended before it was ready: a node may not have answered within ${timeoutMs} ms`)),
      );
      redis.connect().then(() => resolve(), reject);
    });
    // A refused handshake step (SELECT of a database that does not exist) arrives as an 'error' event after connect().
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw failure(err);
  }
  if (cause !== undefined) {
    redis.disconnect();
    throw failure(cause);
  }
  return redis;
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

/**
 * A reset before any reply: what a server that is not Redis does when it closes with our command
 * unread (an HTTP server's 400, then a reset that can overtake the reply or lose it). A Redis
 * server closes only after an error reply (maxclients, protected mode), which names itself.
 */
function slammedShut(err: Error): Error {
  const code = (err as { code?: unknown }).code;
  if (code !== 'EPIPE' && code !== 'ECONNRESET') return err;
  return new Error(`the server closed the connection without a Redis reply (${err.message}): is this the port of a Redis server?`, {
    cause: err,
  });
}

/** ioredis' Cluster says only "Failed to refresh slots cache."; the node's own answer is the cause. */
function nodeCause(err: unknown): unknown {
  const node = (err as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  return node ?? err;
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
