/** Classifies errors from Redis and ioredis for the loop's retry decisions. */
import { describeError } from '../../describe-error.js';
import { UnsupportedServerError } from '../../redact.js';

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The group (or its stream) is gone: the server lost its data or someone destroyed it. */
export const isNoGroup = (err: unknown): boolean => message(err).startsWith('NOGROUP');

/** The message ioredis' Cluster gives a reply that came after the last redirection it may follow. */
const WRAPPED_BUSYGROUP = /^Too many Cluster redirections\. Last error: (?:\w*Error: )?BUSYGROUP /;

/**
 * XGROUP CREATE on a group that exists. On a cluster ioredis may wrap it: when the command
 * followed a MOVED (a failover) and that used up `maxRedirections`, the new master's BUSYGROUP
 * comes back as "Too many Cluster redirections. Last error: ReplyError: BUSYGROUP …", in the
 * message only; an error that carries the node's reply as `lastNodeError` is read too.
 */
export const isBusyGroup = (err: unknown): boolean =>
  message(err).startsWith('BUSYGROUP') ||
  WRAPPED_BUSYGROUP.test(message(err)) ||
  message((err as { lastNodeError?: unknown } | null)?.lastNodeError ?? '').startsWith('BUSYGROUP');

/** The server is at its maxmemory and refuses a command that may grow memory (`denyoom`: XADD, XGROUP CREATE, a writing script). */
export const isOutOfMemory = (err: unknown): boolean => /^OOM\b/.test(message(err));

/** XINFO … of a key that does not exist. */
export const isNoSuchKey = (err: unknown): boolean => /^ERR no such key/.test(message(err));

/** An ordered stream's ack refused: this consumer no longer owns the partition at its epoch (FENCED_ACK_SCRIPT). */
export const isFenced = (err: unknown): boolean => message(err).startsWith('FENCED');

/** A blocked XREADGROUP was failed by the server (stream deleted, failover). */
export const isUnblocked = (err: unknown): boolean => message(err).startsWith('UNBLOCKED');

const TRANSIENT_PREFIXES = ['LOADING', 'BUSY', 'TRYAGAIN', 'CLUSTERDOWN', 'MASTERDOWN', 'READONLY', 'NOSCRIPT'];

/**
 * Redis cannot serve anyone now (busy in a script, loading its data, a cluster or master down, a slot moving, a
 * replica or a master short of replicas refusing writes, out of memory, failing to persist): no fault of the command.
 */
export const isServerUnavailable = (err: unknown): boolean =>
  /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|OOM|MISCONF) /.test(message(err)) ||
  /^Too many Cluster redirections\. Last error: (?:\w*Error: )?(CLUSTERDOWN|TRYAGAIN) /.test(message(err));

/** A cluster redirection: the key's slot is served by another node (or ioredis gave up following them). */
export const isRedirection = (err: unknown): boolean => /^(MOVED|ASK) |^Too many Cluster redirections/.test(message(err));

/**
 * ioredis' Cluster says only "Failed to refresh slots cache." when no node answered; the node's own error
 * (`lastNodeError`: WRONGPASS, ECONNREFUSED …) is what went wrong, explained as on one node (NOAUTH names the
 * fix); the failure itself when there is none.
 */
export function nodeCause(failure: Error): Error {
  const node = (failure as { lastNodeError?: unknown }).lastNodeError;
  return node instanceof Error ? explainConnectionError(node) : failure;
}

/** A cluster's connection failure with its node's answer in the message (and as the cause); the failure as it is elsewhere. */
export function withNodeCause(failure: Error): Error {
  const node = nodeCause(failure);
  return node === failure ? failure : new Error(`${failure.message} ${node.message}`, { cause: node });
}

/**
 * Errors that heal by themselves or by re-creating the group: connection loss, a restarting
 * or failing-over server, a deleted stream; on a cluster also a slot that moved under a
 * command ioredis could not follow (MOVED/ASK on a blocking lane). Anything else (WRONGTYPE,
 * NOPERM, a syntax error, MOVED from a one-node connection to a cluster node) needs a human,
 * so the loop reports it loudly and backs off to its longest delay.
 */
export function isRetryable(err: unknown, onCluster = false): boolean {
  if (err instanceof UnsupportedServerError || isNotRedis(err)) return false;
  if (isRedirection(err)) return onCluster;
  const text = message(err);
  if (isNoGroup(err) || isUnblocked(err)) return true;
  if (TRANSIENT_PREFIXES.some((p) => text.startsWith(p))) return true;
  // ioredis' own errors: no Redis error prefix (an upper-case word) at the start.
  return !/^[A-Z]{3,}\b/.test(text);
}

/**
 * ioredis gave up on a command because the connection went away (its MaxRetriesPerRequestError,
 * a closed connection): the cause is the connection's own error, which names what went wrong;
 * ioredis' words point at an option that is not the problem.
 */
export const isConnectionLoss = (err: unknown): boolean =>
  (err as { name?: unknown } | null)?.name === 'MaxRetriesPerRequestError' ||
  /^Reached the max retries per request limit|^Connection is closed\.|^Stream isn't writeable/.test(message(err));

/**
 * No answer came from Redis: the connection is down or was lost (ioredis gave up on the command),
 * a cluster has no usable slot map, or the command's deadline passed. Not a refusal: Redis may be
 * fine once it is reached again.
 */
export const isUnanswered = (err: unknown): boolean =>
  isConnectionLoss(err) ||
  (err as { name?: unknown } | null)?.name === 'ClusterAllFailedError' ||
  /^Command timed out|^Failed to refresh slots cache|^None of startup nodes is available/.test(message(err));

/**
 * The connection's handshake was refused (a wrong password, none given): ioredis fails every command
 * of that connection with the handshake's own reply (`HELLO … AUTH`, `AUTH`) until the credentials change.
 */
export const isHandshakeRefusal = (err: unknown): boolean => {
  const command = String((err as { command?: { name?: unknown } } | null)?.command?.name ?? '').toLowerCase();
  return /^(WRONGPASS|NOAUTH)\b/.test(message(err)) || (isErrorReply(err) && (command === 'hello' || command === 'auth'));
};

/** Redis itself answered with this error (an upper-case prefix: WRONGTYPE, NOGROUP, LOADING …), as opposed to ioredis failing to reach it. */
export const isErrorReply = (err: unknown): boolean => /^[A-Z]{3,}\b/.test(message(err));

/** ioredis' `commandTimeout` expired: no answer came (the command may still have run). */
export const isCommandTimeout = (err: unknown): boolean => message(err) === 'Command timed out';

/**
 * What a cluster last answered while a command that timed out was being retried (CLUSTERDOWN, MOVED, a closed
 * connection: see DeadlineCluster), when it answered at all.
 */
export const lastClusterAnswer = (err: unknown): Error | undefined => {
  const answer = (err as { lastClusterAnswer?: unknown } | null)?.lastClusterAnswer;
  return answer instanceof Error ? answer : undefined;
};

/**
 * A refusal that retrying cannot cure: Redis answered with an error reply (not a lost
 * connection, not a transient state such as LOADING). NOPERM, OOM, WRONGTYPE, a protocol error …
 */
export const isRefusal = (err: unknown): boolean => err instanceof Error && /^[A-Z]{3,}\b/.test(err.message) && !isRetryable(err);

/**
 * Redis refused a command for the user's ACL: `NOPERM …`, and inside a script Redis 7.0's and Valkey's
 * (Redis 7.2+'s) own wordings, for a command (none of the user's selectors grants it) or a key (one grants
 * the command on other keys: `can't access at least one of the keys`, `No permissions to access a key`).
 */
export const isNoPermission = (err: unknown): boolean =>
  /^NOPERM\b|can't run this command|has no permissions to run|can't access at least one of the keys|No permissions to access a key/.test(
    message(err),
  );

/**
 * The ACL does not reach a key the call names, refused before it ran (`NOPERM`, Redis' and Valkey's wordings). Not a
 * refusal inside a script (`ERR The user executing the script can't access …`, `ERR ACL failure in script: …`): that
 * key was reachable, a command on it was not granted.
 */
export const isKeyOutOfReach = (err: unknown): boolean => /^NOPERM\b.*no permissions to access (one of the keys|a key)/i.test(message(err));

/** The key holds another type than the command works on. */
export const isWrongType = (err: unknown): boolean => /^WRONGTYPE\b/.test(message(err));

/** A refusal due to the key itself (its type, its ids used up): the same write to it will never succeed. */
export const isKeyRefusal = (err: unknown): boolean => /^WRONGTYPE\b|^ERR The stream has exhausted the last possible ID/.test(message(err));

/**
 * A write the settle step needed (a request's reply) that Redis refused or never answered.
 * It is Redis' failure, not the handler's, and concerns that entry only: it stays pending and
 * comes back through reclaim (see settle's replyFailed). The message keeps Redis' own prefix
 * first (NOPERM, OOM …). `permanent`: the key itself refuses (see isKeyRefusal), so no retry
 * can ever succeed.
 */
export class RedisWriteError extends Error {
  readonly permanent: boolean;

  constructor(
    readonly what: string,
    cause: unknown,
  ) {
    super(`${message(cause)} (${what})`, { cause });
    this.name = 'RedisWriteError';
    this.permanent = isKeyRefusal(cause);
  }

  get refusal(): string {
    return message(this.cause);
  }
}

/** What ioredis' reply parser says of bytes that are not RESP: whatever answers on that port is not Redis. */
const NOT_RESP = /^Unknown RESP type|^Protocol error/;
const NOT_REDIS = /^the server does not answer in the Redis protocol/;

/** The connection reached something that does not speak the Redis protocol (explainConnectionError). */
export const isNotRedis = (err: unknown): boolean => NOT_RESP.test(message(err)) || NOT_REDIS.test(message(err));

/**
 * A connection's failure in words that name the fix, where Redis' or ioredis' own do not: NOAUTH (the
 * server wants a password the connection does not give; Redis' words are about HELLO) and a reply that
 * is no RESP (ioredis asks to "report this"; the port is not a Redis server's). Both need a human, so
 * neither is retried at start. Redis' prefix stays first (whoever tests the reason reads it); the
 * original is the cause. Any other error is returned as it is.
 */
export function explainConnectionError(err: Error): Error {
  if (/^NOAUTH\b/.test(err.message))
    return new Error(
      "NOAUTH the server requires a password and the connection gives none: add it to the connection URL (its password part, with the user's name for an ACL user) or to the connection options (password, username)",
      { cause: err },
    );
  if (NOT_RESP.test(err.message)) {
    const said = err.message.replace(/\.? Please report this\.$/, '');
    return new Error(`the server does not answer in the Redis protocol (${said}): is this the port of a Redis server?`, { cause: err });
  }
  return err;
}

/** MOVED on a one-node connection: the URL names a node of a cluster. */
export function clusterNodeError(error: unknown): Error {
  return new Error(
    `${describeError(error)}: the server is a cluster node: pass the cluster's node URLs (a list, or { cluster: [...] }) as connection`,
    { cause: error },
  );
}
