import type { Deserializer, Serializer } from '../ports.js';
import { JsonDeserializer, JsonSerializer } from '../codec/json.js';
import { checkPartitions } from '../partitions.js';
import { validateRetention, type RetentionPolicy } from './retention-options.js';
import { resolveDurability, type Durability, type ResolvedDurability } from './durability-options.js';
import { resolveConnection, type ConnectionOption, type ResolvedConnection } from './connection.js';
import { atMost, boolean, InvalidOptionError, nonEmpty, positiveInt, rejectUnknown, shown, string, withMethod } from './validate.js';

/** Options of {@link RedisStreamsClient}; defaults in docs/guide/options.md and below. */
export interface RedisStreamsClientOptions {
  /** ioredis options or a `redis://` / `rediss://` URL; a cluster: node URLs or `{ cluster: [...] }`. Default: `redis://127.0.0.1:6379`. */
  connection?: ConnectionOption;
  /** Prepended to every pattern to form the stream key; match the server's. Default: `''`. */
  keyPrefix?: string;
  /** How long `emit`/`send` wait for Redis to take an entry (including a reconnect), and for the answer to each command once sent. Default: 5000. */
  commandTimeoutMs?: number;
  /** Retention of every stream this client writes to. Default: none (streams grow until trimmed elsewhere). */
  retention?: RetentionPolicy;
  /** Retention per pattern, overriding `retention`. */
  streamRetention?: Record<string, RetentionPolicy>;
  /** Payload → the entry's `data` field. Default: JSON. */
  serializer?: Serializer<unknown, string>;
  /** A reply's `data` field → the value `send` emits. Default: JSON. */
  deserializer?: Deserializer<string, unknown>;
  /** BLOCK of the reply reader (`send` only). Default: 5000. */
  replyBlockMs?: number;
  /** The reply stream expires this long after the client stops renewing it (it went away). Default: 60000. */
  replyTtlMs?: number;
  /** Partition count per pattern, matching the server's `@StreamPattern(pattern, { partitions })`. Default: none (plain streams). */
  partitions?: Record<string, number>;
  /** The routing key of an entry of a partitioned stream when its `RedisStreamsRecord` names none. Default: none (round-robin). */
  partitionKey?: (pattern: string, data: unknown) => string | undefined;
  /**
   * OpenTelemetry: a `send` span per `emit`/`send`, its context written to the entry's headers
   * (`traceparent`, `tracestate`) for the consumer's `process` span. Reported when
   * `@opentelemetry/api` is installed and an SDK registered. Default: true.
   */
  telemetry?: boolean;
  /**
   * The producer id of idempotent writes (`RedisStreamsRecord`'s `idempotencyKey`): Redis 8.6
   * dedupes per producer id and key, so every client that shares it (other processes, the next
   * run of this one) dedupes against the others. Give producers whose keys mean different things
   * different ids. No `:` in it (the fallback's key layout). Default: `'nestjs-redis-streams'`.
   */
  producerId?: string;
  /**
   * The window of idempotent writes, per stream: a key is remembered `windowSec` seconds
   * (1 to 86400), and on Redis 8.6 at most `maxKeys` keys (1 to 10000, the server's bound) per
   * stream and producer id, the oldest forgotten first. Set on each stream (XCFGSET) at its first
   * idempotent write per connection; every producer of a stream should use the same values (a
   * change makes Redis forget the keys it holds). Default: `{ windowSec: 600, maxKeys: 10000 }`.
   */
  idempotency?: { windowSec?: number; maxKeys?: number };
  /**
   * Use the stream commands newer than Redis 7.0 where the server has them (`XADD … IDMP` for
   * idempotent writes); `false` takes the path every server takes (the keyed-expiry script), e.g.
   * while the producers of a stream run on servers of different versions. Default: true.
   */
  newerCommands?: boolean;
  /**
   * Durable produce: `emit`/`send` resolve only once the entry is on `replicas` replicas (and with
   * `fsync`, fsynced to the AOFs), waited for with WAIT / WAITAOF on the entry's master, right after
   * the write on a connection of its own (writes begun together share one wait per slot). Past
   * `timeoutMs` they fail with `NotDurableError`, which carries the id: the entry was written on the
   * master and may be lost with it. A record's own `durability` overrides it (`false`: none). See
   * docs/failure-semantics.md for what each setting can lose. Default: none (resolved once the master has it).
   */
  durability?: Durability | false;
}

export type ResolvedClientOptions = Required<
  Omit<RedisStreamsClientOptions, 'connection' | 'retention' | 'partitionKey' | 'idempotency' | 'durability'>
> & {
  durability: ResolvedDurability | undefined;
  connection: ResolvedConnection;
  idempotency: IdempotencyWindow;
  retention: RetentionPolicy | undefined;
  partitionKey: RedisStreamsClientOptions['partitionKey'];
};

export const CLIENT_DEFAULTS = {
  keyPrefix: '',
  commandTimeoutMs: 5000,
  replyBlockMs: 5000,
  replyTtlMs: 60_000,
  telemetry: true,
  producerId: 'nestjs-redis-streams',
  idempotency: { windowSec: 600, maxKeys: 10_000 },
  newerCommands: true,
} as const;

/** A stream's idempotency window, as resolved. */
export interface IdempotencyWindow {
  windowSec: number;
  maxKeys: number;
}

/** Redis 8.6's bounds of XCFGSET (IDMP-DURATION, IDMP-MAXSIZE), the same for the fallback. */
export const MAX_IDEMPOTENCY_WINDOW_SEC = 86_400;
export const MAX_IDEMPOTENCY_KEYS = 10_000;

const KNOWN_OPTIONS = [
  'connection',
  'keyPrefix',
  'commandTimeoutMs',
  'retention',
  'streamRetention',
  'serializer',
  'deserializer',
  'replyBlockMs',
  'replyTtlMs',
  'partitions',
  'partitionKey',
  'telemetry',
  'producerId',
  'idempotency',
  'newerCommands',
  'durability',
] as const;

export function resolveClientOptions(input: RedisStreamsClientOptions = {}): ResolvedClientOptions {
  rejectUnknown(input, KNOWN_OPTIONS);
  const replyBlockMs = positiveInt('replyBlockMs', input.replyBlockMs, CLIENT_DEFAULTS.replyBlockMs);
  const replyTtlMs = positiveInt('replyTtlMs', input.replyTtlMs, CLIENT_DEFAULTS.replyTtlMs);
  if (replyTtlMs <= replyBlockMs) {
    // The reader renews the TTL once per BLOCK: a shorter TTL would expire a live client's stream.
    throw new InvalidOptionError('replyTtlMs', `must be above replyBlockMs (${replyBlockMs}), got ${replyTtlMs}`);
  }
  const streamRetention: Record<string, RetentionPolicy> = {};
  if (input.streamRetention !== undefined) {
    if (typeof input.streamRetention !== 'object' || input.streamRetention === null) {
      throw new InvalidOptionError('streamRetention', 'must be an object of pattern → retention policy');
    }
    for (const [pattern, policy] of Object.entries(input.streamRetention)) {
      streamRetention[pattern] = validateRetention(`streamRetention.${pattern}`, policy)!;
    }
  }
  const partitions: Record<string, number> = {};
  if (input.partitions !== undefined) {
    if (typeof input.partitions !== 'object' || input.partitions === null)
      throw new InvalidOptionError('partitions', 'must be an object of pattern → partition count');
    for (const [pattern, count] of Object.entries(input.partitions)) {
      try {
        partitions[pattern] = checkPartitions(pattern, count);
      } catch (err) {
        throw new InvalidOptionError(`partitions.${pattern}`, (err as Error).message.replace(`${pattern}: partitions `, ''));
      }
    }
  }
  if (input.partitionKey !== undefined && typeof input.partitionKey !== 'function') {
    throw new InvalidOptionError('partitionKey', 'must be a function (pattern, data) => string | undefined');
  }
  return {
    connection: resolveConnection(input.connection),
    partitions,
    partitionKey: input.partitionKey,
    keyPrefix: string('keyPrefix', input.keyPrefix, CLIENT_DEFAULTS.keyPrefix),
    commandTimeoutMs: positiveInt('commandTimeoutMs', input.commandTimeoutMs, CLIENT_DEFAULTS.commandTimeoutMs),
    retention: validateRetention('retention', input.retention),
    streamRetention,
    serializer: withMethod('serializer', input.serializer, 'serialize', new JsonSerializer()),
    deserializer: withMethod('deserializer', input.deserializer, 'deserialize', new JsonDeserializer()),
    replyBlockMs,
    replyTtlMs,
    telemetry: boolean('telemetry', input.telemetry, CLIENT_DEFAULTS.telemetry),
    producerId: producerId(input.producerId),
    idempotency: idempotencyWindow(input.idempotency),
    newerCommands: boolean('newerCommands', input.newerCommands, CLIENT_DEFAULTS.newerCommands),
    durability: resolveDurability('durability', input.durability),
  };
}

function producerId(value: unknown): string {
  const id = nonEmpty('producerId', value, CLIENT_DEFAULTS.producerId);
  // `:` separates it from the key in the fallback's key name: `a:b` + `c` and `a` + `b:c` would meet.
  if (id.includes(':')) throw new InvalidOptionError('producerId', `must not contain ":", got ${shown(id)}`);
  return id;
}

function idempotencyWindow(input: unknown): IdempotencyWindow {
  const defaults = CLIENT_DEFAULTS.idempotency;
  if (input === undefined) return { ...defaults };
  rejectUnknown(input as object, ['windowSec', 'maxKeys'], 'idempotency.');
  const { windowSec, maxKeys } = input as Record<string, unknown>;
  return {
    windowSec: atMost(
      'idempotency.windowSec',
      positiveInt('idempotency.windowSec', windowSec, defaults.windowSec),
      MAX_IDEMPOTENCY_WINDOW_SEC,
    ),
    maxKeys: atMost('idempotency.maxKeys', positiveInt('idempotency.maxKeys', maxKeys, defaults.maxKeys), MAX_IDEMPOTENCY_KEYS),
  };
}
