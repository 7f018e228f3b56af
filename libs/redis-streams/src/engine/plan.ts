import type { StreamOrigin } from '../consumer/settle/decide.js';
import type { ReaderStreams } from '../consumer/reader.js';
import { resolveBatchOptions, type ResolvedBatchOptions } from '../options/batch-options.js';
import { checkPatternExtras } from '../options/pattern-options.js';
import { resolveRetry } from '../options/retry-options.js';
import { resolveRateLimit, type RateLimit } from '../options/rate-limit-options.js';
import { resolveFair, type FairGroups } from '../options/fair-options.js';
import { resolvePriorities, type Priorities } from '../options/priority-options.js';
import type { ResolvedDurableAcks } from '../options/durability-options.js';
import { durableAcksWithin } from '../options/server-options.js';
import { checkPartitions, partitionKey, partitionKeys } from '../partitions.js';
import { groupBySlot, hashTagOf, slotOf } from '../slots.js';
import { deadLetterKeyOf, priorityStreamOf } from '../key-names.js';

/** Most slot readers (each a blocking connection) one server opens on a cluster: two fully partitioned streams. */
export const MAX_SLOT_LANES = 128;

/** One handler pattern as the plan sees it: plain data, whatever framework registered it. */
export interface HandlerInfo {
  pattern: string;
  /** An event handler (`@EventPattern`); otherwise a request handler (`@MessagePattern`). */
  isEventHandler: boolean;
  /** The extras of every handler chained on this pattern, the first (whose extras count) first. */
  chain: readonly Readonly<Record<string, unknown>>[];
}

export interface PlanOptions {
  keyPrefix: string;
  deadLetterStream: ((stream: string) => string) | false;
  onCluster: boolean;
  /** The server's `durableAcks`, for ordered patterns without their own. */
  durableAcks?: ResolvedDurableAcks | undefined;
  /** leaseRenewMs: a pattern's durableAcks.timeoutMs must be below it. */
  leaseRenewMs?: number;
  /** How errors name a handler's registration, in the host's words. Default: {@link nestRegistration}. */
  registration?: Registration;
}

/** `pattern` (and extras as source text) as the app registered it: what the plan's errors quote. */
export type Registration = (pattern: string, extras?: string) => string;

/** `@StreamPattern('orders', { partitions: 4 })`: how a Nest app registers a handler. */
export const nestRegistration: Registration = (pattern, extras) => `@StreamPattern('${pattern}'${extras ? `, ${extras}` : ''})`;

/** A stream key as the plan has it: what it is to the app, and its flow-control policies (its readers' and its gate's). */
export interface PlannedOrigin extends StreamOrigin {
  /** `@StreamPattern(key, { rateLimit })`: at most `max` started per `perMs`, by the whole group (its reads take grants). */
  rateLimit?: RateLimit;
  /** `rateLimit` with `perKey`: at most `max` of each key started per `perMs`, by the whole group (an admission). */
  keyRateLimit?: RateLimit;
  /** `@StreamPattern(key, { fair })`: at most `inHand` of each key in hand, keys served round-robin (its reader's settle). */
  fair?: Required<FairGroups>;
  /** `@StreamPattern(key, { priorities })`: this stream is level `level` of its base key's levels (a reader for them all). */
  priorities?: Required<Priorities> & { level: number; base: string };
}

/** What a server reads: every stream key, what each is to the app, and who reads which. */
export interface StreamPlan {
  streams: string[];
  /** Stream key → handler pattern (and partition). */
  origins: ReadonlyMap<string, PlannedOrigin>;
  readers: ReaderStreams[];
  /** Keys no handler reads although a producer with another partition count writes there → why they would. */
  strays: ReadonlyMap<string, string>;
}

/** Handlers and options → the plan; throws, naming the pattern, what can never be read as asked. */
export function planStreams(handlers: Iterable<HandlerInfo>, options: PlanOptions): StreamPlan {
  const origins = new Map<string, PlannedOrigin>();
  const batches = new Map<string, ResolvedBatchOptions>();
  const streams: string[] = [];
  for (const handler of handlers) {
    for (const [key, origin] of streamsOf(handler, options, batches)) {
      // Two patterns on one key (a pattern named as another's priority level, `mail:prio:1`): each would take the other's entries.
      const other = origins.get(key);
      if (other)
        throw new Error(
          `nestjs-redis-streams: stream key "${key}" would be read by two patterns ("${other.pattern}" and "${origin.pattern}"${other.priorities || origin.priorities ? ': one is a priority level of the other' : ''}): rename one`,
        );
      streams.push(key);
      origins.set(key, origin);
    }
  }
  const strays = strayKeys(origins, options.keyPrefix, options.registration ?? nestRegistration);
  return { streams, origins, readers: readerStreams(streams, origins, batches, options), strays };
}

/**
 * A handler pattern is a stream key (plus `keyPrefix`); a partitioned one
 * (`@StreamPattern('orders', { partitions: n })`) is n keys.
 */
function streamsOf(handler: HandlerInfo, options: PlanOptions, batches: Map<string, ResolvedBatchOptions>): [string, PlannedOrigin][] {
  const { pattern } = handler;
  const { keyPrefix } = options;
  const registered = (options.registration ?? nestRegistration)(pattern);
  // An object pattern, as Nest serializes it; a hash-tagged key (`{orders}.paid`) is a string.
  if (pattern.startsWith('{"') || pattern === '{}') {
    throw new Error(`nestjs-redis-streams: pattern ${pattern} must be a string (the stream key), not an object`);
  }
  for (const extras of handler.chain) checkPatternExtras(registered, extras);
  const {
    partitions,
    batch,
    retry: retryPolicy,
    ordered,
    rateLimit: limit,
    durableAcks: ownDurableAcks,
    fair: fairOption,
    priorities: prioritiesOption,
  } = (handler.chain[0] ?? {}) as {
    partitions?: unknown;
    batch?: unknown;
    retry?: unknown;
    ordered?: unknown;
    rateLimit?: unknown;
    durableAcks?: unknown;
    fair?: unknown;
    priorities?: unknown;
  };
  if (retryPolicy !== undefined && !handler.isEventHandler)
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}": a request handler's failure is answered to its caller (the request is acked), never retried; a retry policy is for event handlers`,
    );
  const retry = resolveRetry(`${registered} retry`, retryPolicy);
  checkChain(pattern, handler.chain);
  if (ordered !== undefined && typeof ordered !== 'boolean')
    throw new Error(`nestjs-redis-streams: ${registered}: ordered must be true or false, got ${JSON.stringify(ordered) ?? typeof ordered}`);
  if (ordered === true && batch !== undefined)
    throw new Error(
      `nestjs-redis-streams: ${registered}: ordered and batch together are not supported: a batch call would hold several entries of one key at once; use a single-entry handler with concurrency`,
    );
  if (ordered === true && !handler.isEventHandler)
    throw new Error(
      `nestjs-redis-streams: ${registered}: ordered is for event handlers; a request is answered to its caller, in any order`,
    );
  if (batch !== undefined) {
    if (!handler.isEventHandler)
      throw new Error(
        `nestjs-redis-streams: pattern "${pattern}": a batch handler answers no request; use @StreamPattern, not @MessagePattern`,
      );
    batches.set(pattern, resolveBatchOptions(registered, batch));
  }
  const rateLimit = resolveRateLimit(`${registered} rateLimit`, limit);
  if (rateLimit && batch !== undefined)
    throw new Error(
      `nestjs-redis-streams: ${registered}: rateLimit with batch is not supported yet; a single-entry handler with concurrency takes a limit`,
    );
  if (rateLimit && !rateLimit.perKey && ordered === true)
    throw new Error(
      `nestjs-redis-streams: ${registered}: a pattern's rateLimit with ordered is not supported yet; a limit per key (rateLimit.perKey) is`,
    );
  if (ownDurableAcks !== undefined && ownDurableAcks !== false && ordered !== true)
    throw new Error(
      `nestjs-redis-streams: ${registered}: durableAcks is for ordered patterns (ordered: true); an unordered pattern's acks lost with a master only run entries again, which at-least-once allows`,
    );
  const fair = resolveFair(`${registered} fair`, fairOption);
  if (fair && ordered === true)
    throw new Error(
      `nestjs-redis-streams: ${registered}: fair and ordered together are not supported: ordered is already fair with one entry of a key in hand, in stream order; use one of them`,
    );
  if (fair && batch !== undefined)
    throw new Error(
      `nestjs-redis-streams: ${registered}: fair with batch is not supported: a batch call would hold entries of many keys at once; use a single-entry handler with concurrency`,
    );
  if (fair && !handler.isEventHandler)
    throw new Error(
      `nestjs-redis-streams: ${registered}: fair is for event handlers; a request's caller waits for its answer, not its turn`,
    );
  const priorities = resolvePriorities(`${registered} priorities`, prioritiesOption);
  if (priorities && ordered === true)
    throw new Error(
      `nestjs-redis-streams: ${registered}: priorities with ordered is not supported: a key's later entry at a higher level would run before its earlier ones; order within a level by giving each level a pattern of its own`,
    );
  if (priorities && fair)
    throw new Error(`nestjs-redis-streams: ${registered}: priorities with fair is not supported yet: use one of them`);
  if (priorities && batch !== undefined)
    throw new Error(
      `nestjs-redis-streams: ${registered}: priorities with batch is not supported yet; a single-entry handler with concurrency takes them`,
    );
  if (priorities && !handler.isEventHandler)
    throw new Error(`nestjs-redis-streams: ${registered}: priorities are for event handlers; a request is answered in the order it comes`);
  const durableAcks =
    ordered !== true
      ? undefined
      : ownDurableAcks === undefined
        ? options.durableAcks
        : durableAcksWithin(`${registered} durableAcks`, ownDurableAcks, options.leaseRenewMs ?? Number.MAX_SAFE_INTEGER);
  // A pattern's limit is taken before its reads (a reader of its own); a key's, as each entry starts.
  const limits = rateLimit ? (rateLimit.perKey ? { keyRateLimit: rateLimit } : { rateLimit }) : {};
  const order = {
    ...(ordered === true ? { ordered: true as const } : {}),
    ...(durableAcks ? { durableAcks } : {}),
    ...limits,
    ...(fair ? { fair } : {}),
  };
  // A pattern with priorities reads each base key's levels (level 0 the key itself) in one reader.
  const levelsOf = (base: string, origin: PlannedOrigin): [string, PlannedOrigin][] =>
    priorities
      ? Array.from({ length: priorities.levels }, (_, level) => [
          priorityStreamOf(base, level, options.onCluster),
          { ...origin, priorities: { ...priorities, level, base } },
        ])
      : [[base, origin]];
  if (partitions === undefined) return levelsOf(keyPrefix + pattern, { pattern, retry, ...order });
  checkPartitions(`nestjs-redis-streams: ${registered}`, partitions);
  const keys = partitionKeys(keyPrefix, pattern, partitions as number);
  // Spread over a cluster only while each key's hash tag is its own `pattern:index`.
  if (options.onCluster && keys.some((key, i) => hashTagOf(key) !== `${pattern}:${i}`)) {
    const why = hashTagOf(keyPrefix) !== undefined ? `keyPrefix "${keyPrefix}" has a hash tag` : `the pattern has braces`;
    throw new Error(
      `nestjs-redis-streams: ${why}: the ${partitions} partitions of "${pattern}" would all share one slot (${keys[0]}, …); use a keyPrefix and pattern without braces`,
    );
  }
  return keys.flatMap((key, partition) => levelsOf(key, { pattern, partition, retry, ...order }));
}

/**
 * Nest chains every event handler of one pattern, and the transport reads the first one's
 * extras. The others must agree on `partitions`; a batch handler must be alone: two would each
 * settle the same entries (one's BatchFailure could ack an entry the other has yet to fail).
 */
function checkChain(pattern: string, chain: HandlerInfo['chain']): void {
  const extras = chain as readonly {
    partitions?: unknown;
    batch?: unknown;
    retry?: unknown;
    ordered?: unknown;
    rateLimit?: unknown;
    durableAcks?: unknown;
    fair?: unknown;
    priorities?: unknown;
  }[];
  if (extras.slice(1).some((e) => e.durableAcks !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers and durableAcks on one that is not the first: one stream is acked one way, so give it to the first handler only`,
    );
  }
  if (extras.slice(1).some((e) => e.rateLimit !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers and a rateLimit on one that is not the first: one stream is read one way, so give the limit to the first handler only`,
    );
  }
  if (extras.slice(1).some((e) => e.priorities !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers and priorities on one that is not the first: one stream is read one way, so give priorities to the first handler only`,
    );
  }
  if (extras.slice(1).some((e) => e.fair !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers and fair on one that is not the first: one stream is settled one way, so give fair to the first handler only`,
    );
  }
  if (extras.slice(1).some((e) => e.ordered !== undefined && e.ordered !== extras[0]!.ordered)) {
    throw new Error(
      `nestjs-redis-streams: the handlers of "${pattern}" disagree on ordered: one stream is read one way, so give ordered to the first handler only`,
    );
  }
  if (extras.slice(1).some((e) => e.retry !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers and a retry policy on one that is not the first: an entry is retried one way, so give the policy to the first handler only`,
    );
  }
  if (extras.length > 1 && extras.some((e) => e.batch !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${extras.length} handlers, one of them a batch handler: a batch handler must be its stream's only handler`,
    );
  }
  const partitions = extras.map((e) => e.partitions);
  if (partitions.some((p) => p !== partitions[0])) {
    throw new Error(
      `nestjs-redis-streams: the handlers of "${pattern}" disagree on partitions (${partitions.map(String).join(' against ')}): one stream is read one way`,
    );
  }
}

/**
 * The streams of each reader. One node: one reader for all, and one per batch handler (its
 * reads fetch `maxSize` at a time). A cluster: the same, split by hash slot (a multi-key read
 * must stay in one slot), whose dead-letter keys must share that slot.
 */
function readerStreams(
  streams: string[],
  origins: ReadonlyMap<string, PlannedOrigin>,
  batches: ReadonlyMap<string, ResolvedBatchOptions>,
  options: PlanOptions,
): ReaderStreams[] {
  const levelOf = (s: string) => origins.get(s)!.priorities?.level ?? 0;
  const single = streams.filter((s) => {
    const o = origins.get(s)!;
    return !batches.has(o.pattern) && !o.ordered && !o.rateLimit && !o.fair && !o.priorities;
  });
  const sets: ReaderStreams[] = single.length > 0 ? [{ streams: single }] : [];
  // An ordered stream (each partition) is read by a reader of its own: it reads only while this consumer owns it.
  for (const stream of streams) {
    const origin = origins.get(stream)!;
    if (!origin.ordered) continue;
    const partitions = [...origins.values()].filter((o) => o.pattern === origin.pattern).length;
    sets.push({
      streams: [stream],
      ordered: { pattern: origin.pattern, partition: origin.partition ?? 0, partitions, durableAcks: origin.durableAcks },
    });
  }
  // A rate-limited stream (each partition) too: its reads take grants first, each read its own COUNT. A fair
  // one (each partition): its entries wait in its fair queues, read ahead of what runs (and its limit, if any).
  // A pattern with priorities: each base key's levels one reader, read highest first (and its limit, if any).
  for (const stream of streams) {
    const { rateLimit, pattern, fair, priorities } = origins.get(stream)!;
    const name = options.keyPrefix + pattern;
    if (priorities && priorities.level > 0) continue;
    const levels = priorities
      ? streams.filter((s) => origins.get(s)!.priorities?.base === priorities.base).sort((a, b) => levelOf(b) - levelOf(a))
      : [stream];
    if (rateLimit || fair || priorities)
      sets.push({
        streams: levels,
        ...(rateLimit ? { rateLimit: { name, limit: rateLimit } } : {}),
        ...(fair ? { fair: { name, pattern, groups: fair } } : {}),
        ...(priorities ? { priorities: { highestFirst: levels, lowerEvery: priorities.lowerEvery } } : {}),
      });
  }
  for (const [pattern, batch] of batches) sets.push({ streams: streams.filter((s) => origins.get(s)!.pattern === pattern), batch });
  if (!options.onCluster) return sets;
  const dead = options.deadLetterStream;
  for (const stream of streams) {
    if (dead && slotOf(dead(stream)) !== slotOf(stream)) {
      throw new Error(
        `nestjs-redis-streams: dead-letter stream "${dead(stream)}" of "${stream}" is in another cluster slot: the move and its XACK must be one script. Give it the stream's slot (e.g. "${deadLetterKeyOf(stream, true)}")`,
      );
    }
  }
  // Each set split by slot, keeping what it is (batch, ordered, rate-limited).
  const groups = sets.flatMap((set) => groupBySlot(set.streams).map((group) => ({ ...set, streams: group })));
  if (groups.length > MAX_SLOT_LANES) {
    throw new Error(
      `nestjs-redis-streams: the ${streams.length} streams span ${groups.length} cluster slots, each needing its own blocking connection (at most ${MAX_SLOT_LANES}): give related streams one hash tag, e.g. "{orders}.created", "{orders}.paid", or use fewer partitions`,
    );
  }
  return groups;
}

/**
 * Keys where a producer and a consumer that disagree on a stream's partition count would meet
 * nobody: the plain key of a partitioned stream, the next partition, or partition 0 of a plain one.
 */
function strayKeys(origins: ReadonlyMap<string, StreamOrigin>, keyPrefix: string, registration: Registration): Map<string, string> {
  const strays = new Map<string, string>();
  for (const { pattern, partition } of origins.values()) {
    if (partition === undefined) {
      strays.set(partitionKey(keyPrefix, pattern, 0), `${registration(pattern)} reads the plain key`);
      continue;
    }
    const count = [...origins.values()].filter((o) => o.pattern === pattern).length;
    const why = registration(pattern, `{ partitions: ${count} }`);
    strays.set(keyPrefix + pattern, why);
    strays.set(partitionKey(keyPrefix, pattern, count), why);
  }
  for (const key of origins.keys()) strays.delete(key);
  return strays;
}
