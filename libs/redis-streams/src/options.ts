import { hostname } from 'node:os';
import type { RedisOptions } from 'ioredis';

/**
 * Options of {@link RedisStreamsServer}. Every field maps to one Redis argument or one
 * loop setting; units are in the names. Defaults are listed in README.md and below.
 */
export interface RedisStreamsServerOptions {
  /** ioredis options or a `redis://` / `rediss://` URL. Default: `redis://127.0.0.1:6379`. */
  connection?: RedisOptions | string;
  /** Consumer group name. Default: `'nestjs-streams'`. */
  group?: string;
  /**
   * Consumer name inside the group. Self-drain recovers the pending entries of *this name*
   * at start, so a replica that restarts under the same name gets its un-acked work back at
   * once; under a new name they wait `minIdleMs` for a reclaim. It must be unique per live
   * process. Default: `<hostname>-<pid>` (unique, but new on every restart).
   */
  consumer?: string;
  /** COUNT of every XREADGROUP / XAUTOCLAIM. Default: 10. */
  batchSize?: number;
  /** BLOCK of the park read: the longest a beat lasts when no work arrives. Default: 5000. */
  blockMs?: number;
  /** XAUTOCLAIM min-idle-time: a peer's entry idle this long is taken over. Default: 30000. */
  minIdleMs?: number;
  /** How often the idle time of entries in hand is reset. Default: `minIdleMs / 3`. */
  leaseRenewMs?: number;
  /**
   * Start id when the group is created (XGROUP CREATE … MKSTREAM). `'0'`: the group sees
   * every entry already in the stream, so nothing written before the first worker started
   * is skipped. `'$'`: only entries written from now on. Default: `'0'`.
   */
  groupStartId?: '0' | '$';
  /** Prepended to every pattern to form the stream key. Default: `''`. */
  keyPrefix?: string;
  /** First delay after a failed Redis call; doubles up to `retryMaxDelayMs`. Default: 100. */
  retryInitialDelayMs?: number;
  /** Longest delay between retries of the loop. Default: 5000. */
  retryMaxDelayMs?: number;
}

export type ResolvedServerOptions = Required<Omit<RedisStreamsServerOptions, 'connection'>> & {
  connection: RedisOptions;
};

export const SERVER_DEFAULTS = {
  group: 'nestjs-streams',
  batchSize: 10,
  blockMs: 5000,
  minIdleMs: 30_000,
  groupStartId: '0',
  keyPrefix: '',
  retryInitialDelayMs: 100,
  retryMaxDelayMs: 5000,
} as const;

export class InvalidOptionError extends Error {
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`nestjs-redis-streams: invalid option "${option}": ${reason}`);
    this.name = 'InvalidOptionError';
  }
}

const KNOWN_OPTIONS = new Set<string>([
  'connection',
  'group',
  'consumer',
  'batchSize',
  'blockMs',
  'minIdleMs',
  'leaseRenewMs',
  'groupStartId',
  'keyPrefix',
  'retryInitialDelayMs',
  'retryMaxDelayMs',
]);

/** Validates once, at construction, and fills in the defaults. */
export function resolveServerOptions(input: RedisStreamsServerOptions = {}): ResolvedServerOptions {
  if (typeof input !== 'object' || input === null) {
    throw new InvalidOptionError('options', 'expected an object');
  }
  for (const key of Object.keys(input)) {
    // A typo such as `minIdle` would otherwise silently keep the default.
    if (!KNOWN_OPTIONS.has(key)) throw new InvalidOptionError(key, 'unknown option');
  }
  const minIdleMs = positiveInt('minIdleMs', input.minIdleMs, SERVER_DEFAULTS.minIdleMs);
  const leaseRenewMs = positiveInt('leaseRenewMs', input.leaseRenewMs, Math.max(1, Math.floor(minIdleMs / 3)));
  if (leaseRenewMs >= minIdleMs) {
    throw new InvalidOptionError('leaseRenewMs', `must be below minIdleMs (${minIdleMs}), got ${leaseRenewMs}`);
  }
  const retryInitialDelayMs = positiveInt('retryInitialDelayMs', input.retryInitialDelayMs, SERVER_DEFAULTS.retryInitialDelayMs);
  const retryMaxDelayMs = positiveInt('retryMaxDelayMs', input.retryMaxDelayMs, SERVER_DEFAULTS.retryMaxDelayMs);
  if (retryMaxDelayMs < retryInitialDelayMs) {
    throw new InvalidOptionError('retryMaxDelayMs', `must be at least retryInitialDelayMs (${retryInitialDelayMs})`);
  }
  const groupStartId = input.groupStartId ?? SERVER_DEFAULTS.groupStartId;
  if (groupStartId !== '0' && groupStartId !== '$') {
    throw new InvalidOptionError('groupStartId', `must be '0' or '$', got ${JSON.stringify(groupStartId)}`);
  }
  const keyPrefix = input.keyPrefix ?? SERVER_DEFAULTS.keyPrefix;
  if (typeof keyPrefix !== 'string') throw new InvalidOptionError('keyPrefix', 'must be a string');
  return {
    connection: resolveConnection(input.connection),
    group: name('group', input.group, SERVER_DEFAULTS.group),
    consumer: name('consumer', input.consumer, `${hostname()}-${process.pid}`),
    batchSize: positiveInt('batchSize', input.batchSize, SERVER_DEFAULTS.batchSize),
    // BLOCK 0 would mean "forever" to Redis: the beat (and reclaim) would stop.
    blockMs: positiveInt('blockMs', input.blockMs, SERVER_DEFAULTS.blockMs),
    minIdleMs,
    leaseRenewMs,
    groupStartId,
    keyPrefix,
    retryInitialDelayMs,
    retryMaxDelayMs,
  };
}

/** Turns a URL or ioredis options into ioredis options, rejecting what the loop cannot work with. */
export function resolveConnection(connection: RedisOptions | string | undefined): RedisOptions {
  if (connection === undefined) return { host: '127.0.0.1', port: 6379 };
  if (typeof connection === 'string') {
    let url: URL;
    try {
      url = new URL(connection);
    } catch {
      throw new InvalidOptionError('connection', `not a valid URL: ${JSON.stringify(connection)}`);
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new InvalidOptionError('connection', `URL must start with redis:// or rediss://, got ${url.protocol}//`);
    }
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
    if (!Number.isInteger(db) || db < 0) throw new InvalidOptionError('connection', `bad database number in ${url.pathname}`);
    return {
      host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
      port: url.port ? Number(url.port) : 6379,
      db,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new InvalidOptionError('connection', 'expected ioredis options or a redis:// URL');
  }
  if (connection.keyPrefix) {
    // ioredis prefixes keys it sends but not the keys XREADGROUP replies with.
    throw new InvalidOptionError('connection.keyPrefix', 'use the transport option "keyPrefix" instead');
  }
  return { ...connection };
}

function positiveInt(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOptionError(option, `must be a positive integer, got ${JSON.stringify(value)}`);
  }
  return value;
}

function name(option: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidOptionError(option, `must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  return value;
}
