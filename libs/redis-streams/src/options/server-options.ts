import { hostname } from 'node:os';
import type { Deserializer, Serializer } from '../ports.js';
import { JsonDeserializer, JsonSerializer } from '../codec/json.js';
import { deadLetterKeyOf } from '../key-names.js';
import { isCluster, resolveConnection, type ConnectionOption, type ResolvedConnection } from './connection.js';
import { consumerCleanup, MAX_TIMER_MS } from './cleanup-options.js';
import { resolveDurableAcks, type DurableAcks, type ResolvedDurableAcks } from './durability-options.js';
import { resolveRetry, type RetryDelay, type RetryPolicy } from './retry-options.js';
import { validateDeadLetterRetention, type DeadLetterRetention } from './retention-options.js';
import { atMost, boolean, InvalidOptionError, nonEmpty, positiveInt, rejectUnknown, shown, string, withMethod } from './validate.js';

/**
 * Options of {@link RedisStreamsServer}. Every field maps to one Redis argument or one
 * loop setting; units are in the names. Defaults are listed in docs/guide/options.md and below.
 */
export interface RedisStreamsServerOptions {
  /** ioredis options or a `redis://` / `rediss://` URL. Default: `redis://127.0.0.1:6379`. */
  connection?: ConnectionOption;
  /** Consumer group name. Default: `'nestjs-streams'`. */
  group?: string;
  /**
   * Consumer name inside the group. Self-drain recovers the pending entries of *this name*
   * at start, so a replica that restarts under the same name gets its un-acked work back at
   * once; under a new name they wait `minIdleMs` for a reclaim. It must be unique per live
   * process. Default: `<hostname>-<pid>` (unique, but new on every restart).
   */
  consumer?: string;
  /** COUNT of every XREADGROUP / XAUTOCLAIM, at most {@link MAX_BATCH_SIZE}. Default: 10. */
  batchSize?: number;
  /** Entries of one fetched batch handled at the same time (their acks still go in one round trip). Default: 1. */
  concurrency?: number;
  /**
   * When a park returns a full batch (more is waiting), send the next park's XREADGROUP at
   * once, so Redis serves it while this batch is handled. Up to two batches are then this
   * consumer's (leased; `close()` hands the unstarted ones back). Turn it off for slow
   * handlers whose backlog idle peers should share entry by entry. Default: true.
   */
  readAhead?: boolean;
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
  /**
   * Deadline of each non-blocking command (acks, reclaims, leases). A command cut by a
   * disconnect whose reconnect never succeeds (a deleted ACL user) fails after this long
   * instead of holding the loop, and `close()`, forever. Default: 10000.
   */
  commandTimeoutMs?: number;
  /**
   * How long `listen()` (so `app.listen()`) may take: when Redis is still unreachable then, it
   * fails with the URL (password masked) and the last error, so a worker pointed at a wrong
   * host exits instead of hanging. After the start, the loop retries forever. Default: 30000.
   */
  startupTimeoutMs?: number;
  /** First delay after a failed Redis call; doubles up to `retryMaxDelayMs`. Default: 100. */
  retryInitialDelayMs?: number;
  /** Longest delay between retries of the loop. Default: 5000. */
  retryMaxDelayMs?: number;
  /** Turns an entry's `data` field into the handler's payload. Default: JSON. */
  deserializer?: Deserializer<string, unknown>;
  /** Turns a `@MessagePattern` handler's values into the reply's `data` field. Default: JSON. */
  serializer?: Serializer<unknown, string>;
  /** Reply streams expire this long after the last reply written to them (a client that went away). Default: 60000. */
  replyTtlMs?: number;
  /**
   * Deliveries an entry gets: a handler failure on the last one, or a delivery past it (the
   * consumer died every time), moves the entry to its dead-letter stream. Default: 5.
   */
  maxDeliveries?: number;
  /**
   * Dead-letter stream of a source stream, or `false` to keep poison entries pending (retried
   * every `minIdleMs`, forever). Default: `` stream => `${stream}:dead` ``; on a cluster, when
   * the stream key has no hash tag, `` `{${stream}}:dead` `` (same slot as the stream, so the
   * move and its XACK stay one script; docs/wire-format.md, "Keys the library derives").
   */
  deadLetterStream?: ((stream: string) => string) | false;
  /**
   * Trims each dead-letter stream as letters are added, in the same script as the move: to the newest
   * `maxLen` letters, or to those younger than `maxAgeMs` (Redis' clock). One of them. Default: none
   * (a letter is the only record of a failure; dropping it is a decision to make).
   */
  deadLetterRetention?: DeadLetterRetention;
  /**
   * When a failed entry is tried again: `{ backoff: { type: 'fixed' | 'exponential', delayMs,
   * maxDelayMs?, jitter? } }` or `{ backoff: (deliveryCount, error) => ms }`, for every pattern
   * (a `@StreamPattern`'s own `retry` wins). The entry stays pending, same id, and is delivered
   * again at its due time (see docs/guide/handlers.md, "Retries"). Default: none (a failed entry comes back once
   * idle `minIdleMs − leaseRenewMs`).
   */
  retry?: RetryPolicy;
  /**
   * Most failed entries one consumer keeps waiting for their retry: past it, the consumer reads no
   * new entries until some are retried (logged once). Default: 50000.
   */
  maxWaitingRetries?: number;
  /** Entries larger than this (sum of field and value bytes) are dead-lettered unparsed. Default: none. */
  maxEntryBytes?: number;
  /** A handler still running after this long counts as failed (the entry stays pending, the loop goes on). Default: none. */
  handlerTimeoutMs?: number;
  /**
   * `close()` gives the entries in hand at most this long, then logs them as abandoned (still
   * pending: at-least-once, a peer or a restart runs them again) and closes. `false`: wait as
   * long as the handlers take. Default: 20000: with the 2 s bounds of the Redis steps after it, close() ends well before the 30 s after which orchestrators SIGKILL.
   */
  shutdownTimeoutMs?: number | false;
  /**
   * An entry whose handler has run this long is reported (a WARN naming stream, id and age,
   * repeated every `stuckEntryMs` while it lasts; `server.health()`; a metric). Default: 60000.
   */
  stuckEntryMs?: number;
  /**
   * Deletes consumers of the group idle for `idleMs` that own no pending entry (left behind by
   * restarts under new names), checked and deleted in one script, at most once per `intervalMs`
   * (default 300000) across all workers; a consumer with a connection of this transport's open is
   * kept whatever its idle time (Redis 7.0 does not reset it on empty reads). Default: off (it needs
   * more ACL rights, see docs/guide/security.md).
   */
  consumerCleanup?: { idleMs: number; intervalMs?: number } | false;
  /**
   * OpenTelemetry: a `process` span per entry (parented to the producer's span) and the
   * messaging metrics, reported when `@opentelemetry/api` is installed and the app registered an
   * SDK; without one they cost nothing measurable. `false` turns them off. Default: true.
   */
  telemetry?: boolean;
  /**
   * Use the stream commands of Redis 8.2–8.6 where the server offers them (found at every start:
   * `XREADGROUP … CLAIM` for reclaim, see docs/guide/versions.md); `false` keeps the path every
   * server takes (a cluster in a rolling upgrade whose nodes differ). Default: true.
   */
  newerCommands?: boolean;
  /**
   * Delete each entry from its stream when it is acked, in the ack's own command (`XACKDEL`, Redis
   * 8.2 or later; refused at start on a server without it): the stream keeps only what is unread or
   * pending, with no trimming to tune, and no history after the ack (dead letters are still kept).
   * `'this-group'`: this group is the stream's only reader (`XACKDEL … KEEPREF`: deleted at this
   * group's ack). `'all-groups'`: other groups read the stream too (`ACKED`: deleted once every group
   * has acked it; each group must ack this way). See docs/retention.md. Default: false.
   */
  deleteOnAck?: DeleteOnAck;
  /**
   * How often a worker looks at Redis for the flow control nothing wakes it for: delayed entries
   * scheduled since its last look (one it already knows of is moved in when due, to the ms), and a
   * pause or resume of its patterns. One script per stream and one GET per pattern a look. See
   * docs/guide/flow-control.md. Default: 1000.
   */
  flowCheckMs?: number;
  /**
   * Ordered patterns keep their order through the loss of a master: a key's next entry starts only
   * once its predecessor's ack (or dead-letter move) and the owner's hold on the partition are on
   * `replicas` replicas (WAIT, on a connection of its own), fsynced with `fsync` (WAITAOF). When no
   * replica confirms within `timeoutMs`, `whenUnconfirmed` decides: `'hold'` the partition (nothing
   * starts until one does) or `'carry-on'` (reported degraded). A pattern's own `durableAcks` wins;
   * only for ordered patterns. See docs/guide/ordering.md and docs/failure-semantics.md. Default: none.
   */
  durableAcks?: DurableAcks | false;
}

/** When acked entries leave the stream (see RedisStreamsServerOptions.deleteOnAck). */
export type DeleteOnAck = false | 'this-group' | 'all-groups';
const DELETE_ON_ACK: readonly DeleteOnAck[] = [false, 'this-group', 'all-groups'];

/** The server options with no default: left undefined in the resolved options unless given. */
export type UnsetServerOption = 'maxEntryBytes' | 'handlerTimeoutMs' | 'deadLetterRetention';
export type ResolvedServerOptions = Required<
  Omit<RedisStreamsServerOptions, 'connection' | 'consumerCleanup' | 'shutdownTimeoutMs' | 'retry' | 'durableAcks' | UnsetServerOption>
> &
  Pick<RedisStreamsServerOptions, UnsetServerOption> & {
    /** undefined: none (see `durableAcks`). */
    durableAcks: ResolvedDurableAcks | undefined;
    /** undefined: no policy (see `retry`). */
    retry: RetryDelay | undefined;
    /** undefined: no limit (`false`). */
    shutdownTimeoutMs: number | undefined;
    connection: ResolvedConnection;
    consumerCleanup: { idleMs: number; intervalMs: number } | false;
  };

const KNOWN_OPTIONS = [
  'connection',
  'group',
  'consumer',
  'batchSize',
  'concurrency',
  'readAhead',
  'blockMs',
  'minIdleMs',
  'leaseRenewMs',
  'groupStartId',
  'keyPrefix',
  'commandTimeoutMs',
  'startupTimeoutMs',
  'retryInitialDelayMs',
  'retryMaxDelayMs',
  'deserializer',
  'serializer',
  'replyTtlMs',
  'maxDeliveries',
  'deadLetterStream',
  'deadLetterRetention',
  'retry',
  'maxWaitingRetries',
  'maxEntryBytes',
  'handlerTimeoutMs',
  'shutdownTimeoutMs',
  'stuckEntryMs',
  'flowCheckMs',
  'consumerCleanup',
  'telemetry',
  'newerCommands',
  'deleteOnAck',
  'durableAcks',
] as const;

/**
 * Upper bound of `batchSize`. A consumer holds up to two batches per stream (one in hand, one
 * read ahead), each leased, delivery-counted and acked as one step; past a thousand entries a
 * batch only adds memory and latency, not throughput.
 */
export const MAX_BATCH_SIZE = 1000;

/**
 * Longest BLOCK of a read (`blockMs`, a batch's `maxWaitMs`): a day. A park's watchdog timer runs
 * a little past it, and Node fires a timer beyond 2^31 - 1 ms after 1 ms.
 */
export const MAX_BLOCK_MS = 86_400_000;

export const SERVER_DEFAULTS = {
  group: 'nestjs-streams',
  batchSize: 10,
  concurrency: 1,
  readAhead: true,
  telemetry: true,
  newerCommands: true,
  deleteOnAck: false,
  blockMs: 5000,
  minIdleMs: 30_000,
  groupStartId: '0',
  keyPrefix: '',
  commandTimeoutMs: 10_000,
  startupTimeoutMs: 30_000,
  retryInitialDelayMs: 100,
  retryMaxDelayMs: 5000,
  replyTtlMs: 60_000,
  maxDeliveries: 5,
  maxWaitingRetries: 50_000,
  shutdownTimeoutMs: 20_000,
  stuckEntryMs: 60_000,
  flowCheckMs: 1000,
} as const;

/** Validates once, at construction, and fills in the defaults. */
export function resolveServerOptions(input: RedisStreamsServerOptions = {}): ResolvedServerOptions {
  rejectUnknown(input, KNOWN_OPTIONS);
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
    throw new InvalidOptionError('groupStartId', `must be '0' or '$', got ${shown(groupStartId)}`);
  }
  const connection = resolveConnection(input.connection);
  return {
    connection,
    group: nonEmpty('group', input.group, SERVER_DEFAULTS.group),
    consumer: nonEmpty('consumer', input.consumer, `${hostname()}-${process.pid}`),
    batchSize: atMost('batchSize', positiveInt('batchSize', input.batchSize, SERVER_DEFAULTS.batchSize), MAX_BATCH_SIZE),
    concurrency: positiveInt('concurrency', input.concurrency, SERVER_DEFAULTS.concurrency),
    readAhead: boolean('readAhead', input.readAhead, SERVER_DEFAULTS.readAhead),
    telemetry: boolean('telemetry', input.telemetry, SERVER_DEFAULTS.telemetry),
    newerCommands: boolean('newerCommands', input.newerCommands, SERVER_DEFAULTS.newerCommands),
    deleteOnAck: deleteOnAck(input.deleteOnAck),
    // BLOCK 0 would mean "forever" to Redis: the beat (and reclaim) would stop.
    blockMs: atMost('blockMs', positiveInt('blockMs', input.blockMs, SERVER_DEFAULTS.blockMs), MAX_BLOCK_MS),
    minIdleMs,
    leaseRenewMs,
    groupStartId,
    keyPrefix: string('keyPrefix', input.keyPrefix, SERVER_DEFAULTS.keyPrefix),
    commandTimeoutMs: positiveInt('commandTimeoutMs', input.commandTimeoutMs, SERVER_DEFAULTS.commandTimeoutMs),
    startupTimeoutMs: positiveInt('startupTimeoutMs', input.startupTimeoutMs, SERVER_DEFAULTS.startupTimeoutMs),
    retryInitialDelayMs,
    retryMaxDelayMs,
    deserializer: withMethod('deserializer', input.deserializer, 'deserialize', new JsonDeserializer()),
    serializer: withMethod('serializer', input.serializer, 'serialize', new JsonSerializer()),
    replyTtlMs: positiveInt('replyTtlMs', input.replyTtlMs, SERVER_DEFAULTS.replyTtlMs),
    maxDeliveries: positiveInt('maxDeliveries', input.maxDeliveries, SERVER_DEFAULTS.maxDeliveries),
    deadLetterStream: deadLetterStream(input.deadLetterStream, (stream) => deadLetterKeyOf(stream, isCluster(connection))),
    deadLetterRetention: validateDeadLetterRetention(input.deadLetterRetention),
    retry: resolveRetry('retry', input.retry),
    maxWaitingRetries: positiveInt('maxWaitingRetries', input.maxWaitingRetries, SERVER_DEFAULTS.maxWaitingRetries),
    maxEntryBytes: optionalInt('maxEntryBytes', input.maxEntryBytes),
    handlerTimeoutMs: optionalInt('handlerTimeoutMs', input.handlerTimeoutMs),
    shutdownTimeoutMs:
      input.shutdownTimeoutMs === false
        ? undefined
        : positiveInt('shutdownTimeoutMs', input.shutdownTimeoutMs, SERVER_DEFAULTS.shutdownTimeoutMs),
    stuckEntryMs: atMost('stuckEntryMs', positiveInt('stuckEntryMs', input.stuckEntryMs, SERVER_DEFAULTS.stuckEntryMs), MAX_TIMER_MS),
    consumerCleanup: consumerCleanup(input.consumerCleanup),
    flowCheckMs: atMost('flowCheckMs', positiveInt('flowCheckMs', input.flowCheckMs, SERVER_DEFAULTS.flowCheckMs), MAX_TIMER_MS),
    durableAcks: durableAcksWithin('durableAcks', input.durableAcks, leaseRenewMs),
  };
}

/**
 * `durableAcks`, whose wait must end before the next renewal is due: the owner's beats wait too, on
 * the same connection, and a wait longer than `leaseRenewMs` would let the lease run out behind it.
 */
export function durableAcksWithin(option: string, value: unknown, leaseRenewMs: number): ResolvedDurableAcks | undefined {
  const resolved = resolveDurableAcks(option, value);
  if (resolved && resolved.timeoutMs >= leaseRenewMs)
    throw new InvalidOptionError(`${option}.timeoutMs`, `must be below leaseRenewMs (${leaseRenewMs}), got ${resolved.timeoutMs}`);
  return resolved;
}

function optionalInt(option: string, value: unknown): number | undefined {
  return value === undefined ? undefined : positiveInt(option, value, 0);
}

function deleteOnAck(value: unknown): DeleteOnAck {
  if (value === undefined) return SERVER_DEFAULTS.deleteOnAck;
  if (DELETE_ON_ACK.includes(value as DeleteOnAck)) return value as DeleteOnAck;
  throw new InvalidOptionError('deleteOnAck', `must be false, 'this-group' or 'all-groups', got ${shown(value)}`);
}

function deadLetterStream(value: unknown, byDefault: (stream: string) => string): ((stream: string) => string) | false {
  if (value === undefined) return byDefault;
  if (value === false || typeof value === 'function') return value as ((stream: string) => string) | false;
  throw new InvalidOptionError('deadLetterStream', 'must be a function (stream => key) or false');
}
