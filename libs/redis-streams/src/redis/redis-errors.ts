/** Classifies errors from Redis and ioredis for the loop's retry decisions. */

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The group (or its stream) is gone: the server lost its data or someone destroyed it. */
export const isNoGroup = (err: unknown): boolean => message(err).startsWith('NOGROUP');

/** XGROUP CREATE on a group that exists. */
export const isBusyGroup = (err: unknown): boolean => message(err).startsWith('BUSYGROUP');

/** A blocked XREADGROUP was failed by the server (stream deleted, failover). */
export const isUnblocked = (err: unknown): boolean => message(err).startsWith('UNBLOCKED');

const TRANSIENT_PREFIXES = ['LOADING', 'BUSY', 'TRYAGAIN', 'CLUSTERDOWN', 'MASTERDOWN', 'READONLY', 'NOSCRIPT'];

/**
 * Errors that heal by themselves or by re-creating the group: connection loss, a restarting
 * or failing-over server, a deleted stream. Anything else (WRONGTYPE, NOPERM, a syntax
 * error) needs a human, so the loop reports it loudly and backs off to its longest delay.
 */
export function isRetryable(err: unknown): boolean {
  if (err instanceof UnsupportedServerError) return false;
  const text = message(err);
  if (isNoGroup(err) || isUnblocked(err)) return true;
  if (TRANSIENT_PREFIXES.some((p) => text.startsWith(p))) return true;
  // ioredis' own errors: no Redis error prefix (an upper-case word) at the start.
  return !/^[A-Z]{3,}\b/.test(text);
}

/** ioredis' `commandTimeout` expired: no answer came (the command may still have run). */
export const isCommandTimeout = (err: unknown): boolean => message(err) === 'Command timed out';

/**
 * A write the settle step needed (a request's reply) that Redis refused or never answered.
 * It is Redis' failure, not the handler's: the entry stays pending and the loop takes its
 * Redis-failure path, as for a failed XACK. The message keeps Redis' own prefix first
 * (NOPERM, OOM …), so retry decisions still read it.
 */
export class RedisWriteError extends Error {
  constructor(what: string, cause: unknown) {
    super(`${message(cause)} (${what})`, { cause });
    this.name = 'RedisWriteError';
  }
}

/** The server is older than what this package is tested on: no retry can fix that. */
export class UnsupportedServerError extends Error {
  constructor(detail: string) {
    super(`nestjs-redis-streams: unsupported server: ${detail}`);
    this.name = 'UnsupportedServerError';
  }
}
