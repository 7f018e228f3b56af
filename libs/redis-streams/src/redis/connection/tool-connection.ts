import { Cluster, Redis } from 'ioredis';
import { describeError } from '../../describe-error.js';
import { describeConnection, isCluster, type ResolvedConnection } from '../../options/connection.js';
import type { RedisConnection } from './connect.js';
import { explainConnectionError, isCommandTimeout, isNotRedis } from '../replies/redis-errors.js';

/** A long-running tool's reconnect backoff (the dashboard): a dropped connection comes back; one-shot commands fail at once. */
const reconnect = (tries: number): number => Math.min(tries * 200, 2_000);

/**
 * An operator tool's connection (the CLI's commands, its dashboard): connected and checked with
 * a PING before it is handed over, each command with a deadline of `timeoutMs`. It names the
 * server (password masked) and the cause when it cannot connect. `keepAlive`: reconnect when
 * dropped (the dashboard); otherwise a dropped connection stays down and its commands fail.
 */
export async function openToolConnection(
  connection: ResolvedConnection,
  { timeoutMs, keepAlive = false }: { timeoutMs: number; keepAlive?: boolean },
): Promise<RedisConnection> {
  const redis = isCluster(connection)
    ? new Cluster(connection.cluster, {
        ...connection.options,
        lazyConnect: true,
        clusterRetryStrategy: keepAlive ? reconnect : () => null,
        // Its slots are asked for within the tool's deadline, not ioredis' 1 s: on a loaded machine a node's refusal
        // (WRONGPASS) came after that, and the tool said "timeout" instead of why.
        slotsRefreshTimeout: Math.max(connection.options.slotsRefreshTimeout ?? 1000, timeoutMs),
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
