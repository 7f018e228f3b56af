import type { RedisConnection } from './connection/connect.js';
import { parseServerVersion } from './replies/replies.js';
import { describeError } from '../describe-error.js';

/**
 * What the server offers of the stream commands newer than Redis 7.0, decided in one place: at
 * every (re)start of a reader (a failover may land on another version) and by the operator's tools.
 * A server that offers none takes today's path, unchanged (Redis 7.x, Valkey 8–9).
 */
export interface ServerFeatures {
  /** `Redis 8.6.3`, `Valkey 9.1.2 (redis_version 7.2.4)`. */
  readonly server: string;
  readonly major: number;
  readonly minor: number;
  /** XREADGROUP … CLAIM min-idle-time (Redis 8.4): idle pending entries come with the park's read. */
  readonly claimOnRead: boolean;
  /** XACKDEL, and KEEPREF|DELREF|ACKED on XADD / XTRIM (Redis 8.2): ack and delete in one command. */
  readonly ackDelete: boolean;
  /** XADD … IDMP producer-id idempotent-id, XCFGSET (Redis 8.6): at most one entry per id in the server's window. */
  readonly idempotentProduce: boolean;
  /** WAITAOF (Redis and Valkey 7.2): durable writes with fsync. Not a stream command: `newerCommands` leaves it alone. */
  readonly waitAof?: boolean;
  /** Why the commands could not be looked up (COMMAND refused by an ACL): all taken as absent. */
  readonly lookupError?: string;
}

/** The features' names, as logs, health and inspect print them. */
export const FEATURE_NAMES = {
  claimOnRead: 'claim-on-read',
  ackDelete: 'ack-delete',
  idempotentProduce: 'idempotent-produce',
} as const;

export type FeatureName = (typeof FEATURE_NAMES)[keyof typeof FEATURE_NAMES];

/** What the features of `f` are called: `['claim-on-read', 'ack-delete']`. */
export function featureList(f: ServerFeatures): FeatureName[] {
  return (Object.keys(FEATURE_NAMES) as (keyof typeof FEATURE_NAMES)[]).filter((k) => f[k]).map((k) => FEATURE_NAMES[k]);
}

/** One line for the start-up log: `Redis 8.6.3: claim-on-read, ack-delete, idempotent-produce`. */
export function describeFeatures(f: ServerFeatures): string {
  const list = featureList(f);
  const what = list.length > 0 ? list.join(', ') : 'none of the stream commands newer than Redis 7.0 (the usual path)';
  return `${f.server}: ${what}${f.lookupError ? ` (COMMAND refused: ${f.lookupError})` : ''}`;
}

/** None of the newer commands (an option turned them off, or nothing is known yet). */
export function withoutNewerCommands(f: ServerFeatures): ServerFeatures {
  return { ...f, claimOnRead: false, ackDelete: false, idempotentProduce: false };
}

/**
 * INFO server, `COMMAND INFO XACKDEL XCFGSET WAITAOF` and `COMMAND DOCS XREADGROUP` in one round trip.
 * Asks for the commands and arguments themselves rather than comparing versions: a build without
 * one (a managed service, a fork reporting a Redis version) is not taken for having it.
 */
export async function detectServerFeatures(conn: RedisConnection): Promise<ServerFeatures> {
  const [info, commands, docs] = await Promise.allSettled([
    conn.info('server'),
    conn.call('COMMAND', 'INFO', 'XACKDEL', 'XCFGSET', 'WAITAOF'),
    conn.call('COMMAND', 'DOCS', 'XREADGROUP'),
  ]);
  if (info.status === 'rejected') throw info.reason;
  const { server, major, minor } = parseServerVersion(info.value);
  const base = { server, major, minor, claimOnRead: false, ackDelete: false, idempotentProduce: false };
  if (commands.status === 'rejected' || docs.status === 'rejected') {
    const refused = commands.status === 'rejected' ? commands.reason : (docs as PromiseRejectedResult).reason;
    return { ...base, lookupError: describeError(refused) };
  }
  // COMMAND INFO: one row per name asked, nil for a command the server does not know.
  const known = Array.isArray(commands.value) ? commands.value.map((c: unknown) => Array.isArray(c) && c.length > 0) : [];
  return {
    ...base,
    ackDelete: known[0] === true,
    idempotentProduce: known[1] === true,
    waitAof: known[2] === true,
    claimOnRead: hasToken(docs.value, 'CLAIM'),
  };
}

/** Whether a `COMMAND DOCS` reply (RESP2 flat lists or RESP3 maps) has an argument whose token is `token`, at any depth. */
function hasToken(reply: unknown, token: string): boolean {
  const seen: unknown[] = [reply];
  while (seen.length > 0) {
    const node = seen.pop();
    if (node instanceof Map) {
      if (String(node.get('token')).toUpperCase() === token) return true;
      seen.push(...node.values());
    } else if (Array.isArray(node)) {
      const i = node.indexOf('token');
      if (i >= 0 && i % 2 === 0 && String(node[i + 1]).toUpperCase() === token) return true;
      seen.push(...node);
    }
  }
  return false;
}
