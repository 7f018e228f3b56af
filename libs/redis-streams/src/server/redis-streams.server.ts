import { Logger } from '@nestjs/common';
import { CustomTransportStrategy, Server, type MessageHandler, type WritePacket } from '@nestjs/microservices';
import { EventEmitter } from 'node:events';
import { combineLatest, distinctUntilChanged, isObservable, lastValueFrom, map, throwError, type Subscription } from 'rxjs';
import type { Cluster, Redis } from 'ioredis';
import { ConsumerHygiene } from '../consumer/consumer-hygiene.js';
import { ConsumerLoop } from '../consumer/consumer-loop.js';
import { settle, type SettleDeps, type StreamOrigin } from '../consumer/settle.js';
import { decideBatch, type BatchDecideDeps } from '../consumer/decide-batch.js';
import type { RedisStreamsBatchContext, StreamBatchEntry } from '../batch.js';
import { resolveBatchOptions, type ResolvedBatchOptions } from '../options/batch-options.js';
import { checkPartitions, partitionKey, partitionKeys } from '../partitions.js';
import type { RedisConnection } from '../redis/connect.js';
import type { DecodedEntry } from '../codec/entry-codec.js';
import { encodeReply, UnserializableResult } from '../codec/reply-codec.js';
import type { RedisStreamsContext } from '../context.js';
import { describeError } from '../describe-error.js';
import { describeConnection, isCluster, secretsOf } from '../options/connection.js';
import { carriesCommand, redactError } from '../redact.js';
import { escapeControl } from '../escape-control.js';
import { resolveServerOptions, type RedisStreamsServerOptions, type ResolvedServerOptions } from '../options/server-options.js';
import { closeCommandLane, foldLaneStates, Lanes, openCommandLane, type CommandLane } from '../redis/lanes.js';
import { groupBySlot, hashTagOf, sameSlotKey, slotOf } from '../redis/slots.js';
import { isRedirection, isRetryable, RedisWriteError } from '../redis/redis-errors.js';
import { StreamCommands } from '../redis/stream-commands.js';
import { REDIS_STREAMS_TRANSPORT } from '../transport.js';
import { RedisStreamsStatus, STATUS_OF_LANES } from '../status.js';
import type { RedisStreamsEvents } from './events.js';
import { within } from '../within.js';
import { writeReplies } from './reply-writer.js';
import { HealthProbe } from '../health/health-probe.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import { loadOtelApi } from '../telemetry/otel-api.js';

/** A handler's resolved result as a value: an Observable still has to complete (or error), and its last value counts. */
function resultOf(value: unknown): unknown {
  return isObservable(value) ? lastValueFrom(value, { defaultValue: undefined }) : value;
}

/** Most slot lanes (each a blocking connection) one server opens on a cluster: two fully partitioned streams. */
export const MAX_SLOT_LANES = 128;

/** One reader: the loop over the streams of one slot (all streams on one node), and its lanes. */
interface Reader {
  lanes: Lanes;
  loop: ConsumerLoop;
  /** Resolves when the loop has finished. */
  done: Promise<void>;
  run: Subscription;
}

/**
 * Nest chains every event handler of one pattern, and the transport reads the first one's
 * extras. The others must agree on `partitions`; a batch handler must be alone: two would each
 * settle the same entries (one's BatchFailure could ack an entry the other has yet to fail).
 */
function checkChain(pattern: string, head: MessageHandler): void {
  const extrasOf = (h: MessageHandler) => (h.extras ?? {}) as { partitions?: unknown; batch?: unknown };
  const nextOf = (h: MessageHandler) => h.next as MessageHandler | undefined;
  const chain: MessageHandler[] = [];
  for (let h: MessageHandler | undefined = head; h; h = nextOf(h)) chain.push(h);
  if (chain.length > 1 && chain.some((h) => extrasOf(h).batch !== undefined)) {
    throw new Error(
      `nestjs-redis-streams: pattern "${pattern}" has ${chain.length} handlers, one of them a batch handler: a batch handler must be its stream's only handler`,
    );
  }
  const partitions = chain.map((h) => extrasOf(h).partitions);
  if (partitions.some((p) => p !== partitions[0])) {
    throw new Error(
      `nestjs-redis-streams: the handlers of "${pattern}" disagree on partitions (${partitions.map(String).join(' against ')}): one stream is read one way`,
    );
  }
}

/** The streams one reader reads, and for a batch handler's reader its batch options. */
interface ReaderStreams {
  streams: string[];
  batch?: ResolvedBatchOptions | undefined;
}

/** MOVED on a one-node connection: the URL names a node of a cluster. */
function clusterNodeError(error: unknown): Error {
  return new Error(
    `${describeError(error)}: the server is a cluster node: pass the cluster's node URLs (a list, or { cluster: [...] }) as connection`,
    { cause: error },
  );
}

// What Nest's other transports answer to a request without a handler.
const NO_MESSAGE_HANDLER = 'There is no matching message handler defined in the remote service.';

/**
 * Nest transport strategy over one Redis Stream consumer group. Every `@EventPattern(key)`
 * and `@MessagePattern(key)` handler makes `key` (plus `keyPrefix`) a stream this server's
 * consumer reads.
 *
 * `close()` stops taking entries, lets the entry in hand finish and be settled, hands the
 * rest of its batch back to the group, then closes its connections.
 *
 * On a Redis Cluster it runs one reader per hash slot its streams use (streams sharing a hash
 * tag share one): each parks on its slot's master, so no command ever spans slots.
 */
export class RedisStreamsServer extends Server<RedisStreamsEvents, RedisStreamsStatus> implements CustomTransportStrategy {
  override readonly transportId = REDIS_STREAMS_TRANSPORT;
  protected override readonly logger = new Logger(RedisStreamsServer.name);
  readonly options: Readonly<ResolvedServerOptions>;
  private readonly events = new EventEmitter();
  private command: CommandLane | undefined;
  private readers: Reader[] = [];
  private closing: Promise<void> | undefined;
  private hygiene: ConsumerHygiene | undefined;
  /** Every reader started (listen answered without error): from then on entries may be in hand. */
  private startedOk = false;
  /** Stream key → handler pattern (and partition), for every stream read. */
  private readonly origins = new Map<string, StreamOrigin>();
  /** Handler pattern → its batch options, for batch handlers (`@StreamPattern(key, { batch })`). */
  private readonly batches = new Map<string, ResolvedBatchOptions>();
  private laneStatus: Subscription | undefined;
  private startupTimer: NodeJS.Timeout | undefined;
  private abortStart: ((error: unknown) => void) | undefined;
  private probe: HealthProbe | undefined;
  private telemetry: ConsumerTelemetry | undefined;

  private readonly defaultStartHook = this.onProcessingStartHook;

  constructor(options: RedisStreamsServerOptions = {}) {
    super();
    // Nest 12 swallows an event handler's error unless its transport says it reports them (as we
    // do: a failed entry stays pending). Nest 11 always propagated them and has no such field, so
    // it is set here rather than declared, which compiles against both.
    (this as unknown as { propagatesEventHandlerErrors: boolean }).propagatesEventHandlerErrors = true;
    this.options = resolveServerOptions(options);
  }

  listen(callback: (err?: unknown, ...optionalParams: unknown[]) => void): void {
    let streams: string[];
    let slotGroups: ReaderStreams[];
    try {
      streams = this.streamKeys();
      slotGroups = this.readerStreams(streams);
    } catch (err) {
      return callback(err);
    }
    if (streams.length === 0) return callback();
    if (this.closing) return callback(new Error('nestjs-redis-streams: closed before it started'));
    const { options } = this;
    let started = false;
    let laneError: unknown;
    let loopError: unknown;
    // Until the first start, `listen` must answer: with an error for what needs a human (bad
    // password, missing ACL right, WRONGTYPE key, an old server) at once, and for what may heal
    // (Redis unreachable) after `startupTimeoutMs`. Once started, the loop retries forever.
    // Every error handed over is scrubbed (ioredis' carry the handshake's AUTH arguments), with the masked URL.
    const secrets = secretsOf(options.connection);
    const where = describeConnection(options.connection);
    const failStart = (error: unknown) => {
      if (started) return;
      started = true;
      clearTimeout(this.startupTimer);
      void this.close();
      callback(redactError(error, describeError(error).includes(where) ? undefined : where, secrets));
    };
    this.abortStart = failStart;
    this.startupTimer = setTimeout(() => {
      // While a connection is down, its error is the cause (the loop's own only says it gave up waiting).
      const down = this.readers.some((r) => !r.lanes.ready());
      const cause = down ? (laneError ?? loopError) : (loopError ?? laneError);
      failStart(
        new Error(
          `nestjs-redis-streams: could not start within ${options.startupTimeoutMs} ms: ${where} unreachable: ${cause === undefined ? 'no answer' : describeError(cause)}`,
          {
            cause,
          },
        ),
      );
    }, options.startupTimeoutMs);
    const name = `${options.group}:${options.consumer}`;
    const onCluster = isCluster(options.connection);
    const onLaneError = (lane: string, failure: Error) => {
      // ioredis' Cluster says only "Failed to refresh slots cache."; the node's own answer is the cause.
      const nodeError = (failure as { lastNodeError?: unknown }).lastNodeError;
      const err = nodeError instanceof Error ? new Error(`${failure.message} ${nodeError.message}`, { cause: nodeError }) : failure;
      laneError = err;
      if (!started && !isRetryable(nodeError instanceof Error ? nodeError : err, onCluster)) return failStart(err);
      this.logger.warn(`${lane} connection: ${describeError(err)}`);
    };
    // One command connection (on a cluster, one ioredis Cluster) serves every reader.
    const command = (this.command = openCommandLane(options.connection, name, onLaneError, options.commandTimeoutMs));
    const commands = new StreamCommands(command.conn, options.group);
    this.probe = new HealthProbe({
      group: options.group,
      consumer: options.consumer,
      streams,
      commands,
      readers: () => this.readers.map((r) => ({ streams: r.loop.streams, vitals: r.loop.vitals() })),
      state: () => (this.closing ? 'stopped' : this.startedOk ? 'running' : 'starting'),
    });
    const settleDeps: BatchDecideDeps = {
      commands,
      dispatch: (pattern, entry, ctx) => this.dispatch(commands, pattern, entry, ctx),
      dispatchBatch: (pattern, entries, ctx) => this.dispatchBatch(pattern, entries, ctx),
      originOf: (stream) => this.origins.get(stream) ?? { pattern: stream.slice(options.keyPrefix.length) },
      deserializer: options.deserializer,
      group: options.group,
      consumer: options.consumer,
      keyPrefix: options.keyPrefix,
      maxDeliveries: options.maxDeliveries,
      deadLetterStream: options.deadLetterStream,
      maxEntryBytes: options.maxEntryBytes,
      handlerTimeoutMs: options.handlerTimeoutMs,
      logger: this.logger,
    };
    const ready = new Set<ConsumerLoop>();
    let markStarted!: () => void;
    const startedAll = new Promise<void>((resolve) => (markStarted = resolve));
    // No handler runs before OpenTelemetry is found (or found missing): every entry is reported alike.
    const telemetryReady = this.startTelemetry(settleDeps);
    const handlersMayRun = Promise.all([startedAll, telemetryReady]).then(() => undefined);
    this.readers = slotGroups.map(({ streams: group, batch }) => {
      const lanes = new Lanes({
        connection: options.connection,
        name: slotGroups.length === 1 ? name : `${name}:${slotOf(group[0]!)}${batch ? ':batch' : ''}`,
        onError: onLaneError,
        command,
        slotKey: group[0]!,
      });
      const loop: ConsumerLoop = new ConsumerLoop({
        streams: group,
        options,
        commands,
        lanes,
        logger: this.logger,
        settle: (entry, source) => settle(settleDeps, entry, source),
        batch: batch && { ...batch, decide: (entries, source) => decideBatch(settleDeps, entries, source) },
        onSettled: (event) => {
          this.telemetry?.settled(event);
          // A Redis failure (a refused XACK, a reply write) carries its command: scrubbed; a handler's error is the app's own.
          this.emit('settled', carriesCommand(event.error) ? { ...event, error: redactError(event.error, undefined, secrets) } : event);
        },
        onDeleted: (stream, ids) => {
          this.logger.error(
            `${ids.length} pending entries of "${stream}" were deleted before they were acked (data loss): ${ids.join(', ')}`,
          );
          this.emit('deleted', stream, ids);
        },
        onCluster,
        onError: (error, retryInMs) => {
          loopError = error;
          // ioredis updates its slot map only on redirections it follows itself (none with
          // maxRedirections 0, and none seen on a blocking lane): a moved slot must not stay unknown.
          if (onCluster && isRedirection(error)) (command.conn as Cluster).refreshSlotsCache();
          if (!started && !isRetryable(error, onCluster)) return failStart(isRedirection(error) ? clusterNodeError(error) : error);
          const log = isRetryable(error, onCluster) ? 'warn' : 'error';
          this.logger[log](`consumer loop: ${describeError(error)}; retrying in ${retryInMs} ms`);
          this.emit('error', redactError(error, where, secrets), retryInMs);
        },
        onReady: () => {
          ready.add(loop);
          if (started || ready.size < slotGroups.length) return;
          started = true;
          this.startedOk = true;
          clearTimeout(this.startupTimer);
          const lanesNote = slotGroups.length > 1 ? ` (${slotGroups.length} slot lanes)` : '';
          this.logger.log(
            `consumer "${options.consumer}" of group "${options.group}" reading ${streams.map((s) => `"${s}"`).join(', ')}${lanesNote}`,
          );
          callback();
          markStarted();
          void this.warnStrays(command.conn);
          this.startHygiene(streams, commands);
        },
        started: handlersMayRun,
      });
      let run: Subscription | undefined;
      const done = new Promise<void>((resolve) => {
        run = loop.run().subscribe({ complete: resolve, error: resolve });
      });
      return { lanes, loop, done, run: run! };
    });
    this.laneStatus = combineLatest(this.readers.map((r) => r.lanes.state$))
      .pipe(
        map((states) => STATUS_OF_LANES[foldLaneStates(states)]),
        distinctUntilChanged(),
      )
      .subscribe((s) => {
        this.probe?.lanesReady(s === RedisStreamsStatus.CONNECTED);
        this._status$.next(s);
      });
  }

  /** Spans and metrics, when the app has `@opentelemetry/api` (and `telemetry` is not off). */
  private async startTelemetry(settleDeps: SettleDeps): Promise<void> {
    if (!this.options.telemetry) return;
    const api = await loadOtelApi();
    if (!api || this.closing) return;
    try {
      settleDeps.telemetry = this.telemetry = new ConsumerTelemetry(api, this.options.group, this.options.consumer, this.probe!.stats);
    } catch (err) {
      // The handlers wait for this: a broken SDK must cost the telemetry, never the consumer.
      this.logger.warn(`OpenTelemetry unavailable, carrying on without it: ${describeError(err)}`);
    }
  }

  /**
   * The figures a health check decides on: whether the loops can talk to Redis, and per stream
   * the group's lag and pending count (XINFO GROUPS, read at most every `maxStatsAgeMs`, default
   * 1000; `stats: false` skips them, as liveness does) and this consumer's entries in hand.
   * Answers within about a second even when Redis does not: with the last figures it has, and
   * `statsError` saying why.
   */
  async health(options: { maxStatsAgeMs?: number; stats?: boolean } = {}): Promise<RedisStreamsHealth> {
    if (this.probe) return this.probe.snapshot(options);
    const state = this.closing ? 'stopped' : 'starting';
    return { state, group: this.options.group, consumer: this.options.consumer, redisDownForMs: 0, streams: [], statsAgeMs: undefined };
  }

  /**
   * Resolves once the entry in hand is settled (or abandoned after `shutdownTimeoutMs`) and
   * every connection is closed. Terminal: nothing of the transport runs after it.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearTimeout(this.startupTimer);
      // `listen` must answer: an app closed while still starting gets an error, not silence.
      this.abortStart?.(new Error('nestjs-redis-streams: closed before it started'));
      if (this.readers.length === 0) return;
      this._status$.next(RedisStreamsStatus.CLOSING);
      this.logger.log(`consumer "${this.options.consumer}" stopping: finishing the entry in hand`);
      // Every lane woken at once: stopping takes as long as the slowest, not their sum.
      await Promise.all([...this.readers.map((r) => r.loop.stop()), this.hygiene?.stop()]);
      // Not started: no handler ran, nothing is in hand. Commands of the start still waiting on an
      // unready Redis (up to commandTimeoutMs) are cut now rather than waited for.
      if (!this.startedOk) await this.closeConnections();
      await Promise.all(this.readers.map((r) => this.settleInHand(r)));
      this.telemetry?.dispose();
      await this.closeConnections();
      this.laneStatus?.unsubscribe();
      this._status$.next(RedisStreamsStatus.CLOSED);
      this.logger.log(`consumer "${this.options.consumer}" stopped`);
    })();
    return this.closing;
  }

  /**
   * Entries under keys no handler reads: a producer and a consumer that disagree on a stream's
   * partition count (the plain key of a partitioned stream, the next partition, or partition 0 of
   * a plain one). Reported once at start; what is there waits, it is not lost.
   */
  private async warnStrays(conn: RedisConnection): Promise<void> {
    const strays = new Map<string, string>();
    for (const [key, { pattern, partition }] of this.origins) {
      const plain = this.options.keyPrefix + pattern;
      if (partition === undefined)
        strays.set(partitionKey(this.options.keyPrefix, pattern, 0), `@StreamPattern('${pattern}') reads the plain key`);
      else {
        const count = [...this.origins.values()].filter((o) => o.pattern === pattern).length;
        const why = `@StreamPattern('${pattern}', { partitions: ${count} })`;
        strays.set(plain, why);
        strays.set(partitionKey(this.options.keyPrefix, pattern, count), why);
      }
      strays.delete(key);
    }
    for (const key of this.origins.keys()) strays.delete(key);
    for (const [key, why] of strays) {
      const length = await conn.xlen(key).catch(() => 0);
      if (length > 0) {
        this.logger.warn(
          `stream "${key}" holds ${length} entries that no handler of this consumer reads (${why}): do producers use another partition count?`,
        );
      }
    }
  }

  /** `consumerCleanup`: deletes consumers left behind, beside the loops. */
  private startHygiene(streams: string[], commands: StreamCommands): void {
    const { consumerCleanup, consumer, connection } = this.options;
    if (!consumerCleanup || this.closing) return;
    if (consumerCleanup.idleMs <= 2 * this.options.blockMs) {
      // Redis counts a consumer parked in XREADGROUP BLOCK as idle from the start of the read.
      this.logger.warn(
        `consumerCleanup.idleMs (${consumerCleanup.idleMs}) is not well above blockMs (${this.options.blockMs}): live consumers parked that long are deleted too (and re-created by their next read)`,
      );
    }
    this.hygiene = new ConsumerHygiene({
      streams,
      commands,
      consumer,
      ...consumerCleanup,
      // The lock shares its stream's slot (one script names both), like the dead-letter key.
      // Per group: two groups of one stream clean their own consumers on their own schedule.
      lockOf: (stream) =>
        isCluster(connection) ? sameSlotKey(stream, `:cleanup:${this.options.group}`) : `${stream}:cleanup:${this.options.group}`,
      onDeleted: (stream, names) => {
        this.logger.log(
          `deleted ${names.length} consumers of group "${this.options.group}" on "${stream}" idle past ${consumerCleanup.idleMs} ms with nothing pending: ${names.map(escapeControl).join(', ')}`,
        );
        this.emit('consumersDeleted', stream, names);
      },
      logger: this.logger,
    });
    this.hygiene.start();
  }

  private async closeConnections(): Promise<void> {
    await Promise.all(this.readers.map((r) => r.lanes.close()));
    if (this.command) await closeCommandLane(this.command);
  }

  /** Waits for a reader to finish the entry in hand, at most `shutdownTimeoutMs`. */
  private async settleInHand(reader: Reader): Promise<void> {
    const limit = this.options.shutdownTimeoutMs;
    if (limit === undefined) return reader.done;
    const settled = await within(
      reader.done.then(() => true),
      limit,
      false,
    );
    if (!settled) {
      // Still pending under this consumer: self-drain (same name) or a peer's reclaim runs them again.
      const abandoned = reader.loop.inHand();
      this.logger.error(
        `shutdownTimeoutMs (${limit}) passed: abandoning ${abandoned.length} entries in hand, left pending: ${abandoned.map((e) => `${e.stream} ${e.id}`).join(', ')}`,
      );
      // The handler cannot be cancelled, but nothing of ours waits for it: no lease renewal,
      // no retry timer, no late ack.
      await reader.loop.abandon();
      reader.run.unsubscribe();
    }
  }

  /**
   * The streams of each reader. One node: one reader for all, and one per batch handler (its
   * reads fetch `maxSize` at a time). A cluster: the same, split by hash slot (a multi-key read
   * must stay in one slot), whose dead-letter keys must share that slot.
   */
  private readerStreams(streams: string[]): ReaderStreams[] {
    const single = streams.filter((s) => !this.batches.has(this.origins.get(s)!.pattern));
    const sets: ReaderStreams[] = single.length > 0 ? [{ streams: single }] : [];
    for (const [pattern, batch] of this.batches)
      sets.push({ streams: streams.filter((s) => this.origins.get(s)!.pattern === pattern), batch });
    if (!isCluster(this.options.connection)) return sets;
    const dead = this.options.deadLetterStream;
    for (const stream of streams) {
      if (dead && slotOf(dead(stream)) !== slotOf(stream)) {
        throw new Error(
          `nestjs-redis-streams: dead-letter stream "${dead(stream)}" of "${stream}" is in another cluster slot: the move and its XACK must be one script. Give it the stream's slot (e.g. "${sameSlotKey(stream, ':dead')}")`,
        );
      }
    }
    const groups = sets.flatMap(({ streams: set, batch }) => groupBySlot(set).map((group) => ({ streams: group, batch })));
    if (groups.length > MAX_SLOT_LANES) {
      throw new Error(
        `nestjs-redis-streams: the ${streams.length} streams span ${groups.length} cluster slots, each needing its own blocking connection (at most ${MAX_SLOT_LANES}): give related streams one hash tag, e.g. "{orders}.created", "{orders}.paid", or use fewer partitions`,
      );
    }
    return groups;
  }

  on<K extends keyof RedisStreamsEvents>(event: K, callback: RedisStreamsEvents[K]): this {
    this.events.on(event as string, callback);
    return this;
  }

  /** `[command, blocking]` ioredis connections; on a cluster `[Cluster, blocking of each slot lane…]`. */
  unwrap<T = [Redis | Cluster, ...Redis[]]>(): T {
    if (!this.command) {
      throw new Error('Not initialized. Please call the "listen"/"startAllMicroservices" method before accessing the server.');
    }
    return [this.command.conn, ...this.readers.flatMap((r) => r.lanes.blockingConnection() ?? [])] as T;
  }

  private emit(event: string, ...args: unknown[]): void {
    // EventEmitter throws an 'error' nobody listens to; the loop already logged it.
    if (this.events.listenerCount(event) === 0) return;
    try {
      this.events.emit(event, ...args);
    } catch (err) {
      // A listener's bug must not stop the loop.
      this.logger.error(`"${event}" listener threw: ${describeError(err)}`);
    }
  }

  /**
   * Every handler pattern (events and requests alike) is a stream key; a partitioned one
   * (`@StreamPattern('orders', { partitions: n })`) is n keys.
   */
  private streamKeys(): string[] {
    const keys: string[] = [];
    this.origins.clear();
    this.batches.clear();
    for (const [pattern, handler] of this.messageHandlers) {
      // An object pattern, as Nest serializes it; a hash-tagged key (`{orders}.paid`) is a string.
      if (pattern.startsWith('{"') || pattern === '{}') {
        throw new Error(`nestjs-redis-streams: pattern ${pattern} must be a string (the stream key), not an object`);
      }
      const { partitions, batch } = (handler.extras ?? {}) as { partitions?: unknown; batch?: unknown };
      checkChain(pattern, handler);
      if (batch !== undefined) {
        if (!handler.isEventHandler)
          throw new Error(
            `nestjs-redis-streams: pattern "${pattern}": a batch handler answers no request; use @StreamPattern, not @MessagePattern`,
          );
        this.batches.set(pattern, resolveBatchOptions(`@StreamPattern('${pattern}')`, batch));
      }
      if (partitions === undefined) {
        keys.push(this.options.keyPrefix + pattern);
        this.origins.set(this.options.keyPrefix + pattern, { pattern });
        continue;
      }
      checkPartitions(`nestjs-redis-streams: @StreamPattern('${pattern}')`, partitions);
      const keysOf = partitionKeys(this.options.keyPrefix, pattern, partitions as number);
      // Spread over a cluster only while each key's hash tag is its own `pattern:index`.
      if (isCluster(this.options.connection) && keysOf.some((key, i) => hashTagOf(key) !== `${pattern}:${i}`)) {
        const why =
          hashTagOf(this.options.keyPrefix) !== undefined
            ? `keyPrefix "${this.options.keyPrefix}" has a hash tag`
            : `the pattern has braces`;
        throw new Error(
          `nestjs-redis-streams: ${why}: the ${partitions} partitions of "${pattern}" would all share one slot (${keysOf[0]}, …); use a keyPrefix and pattern without braces`,
        );
      }
      keysOf.forEach((key, partition) => {
        keys.push(key);
        this.origins.set(key, { pattern, partition });
      });
    }
    if (keys.length === 0) this.logger.warn('no @EventPattern or @MessagePattern handlers: this consumer reads no stream');
    return keys;
  }

  /**
   * Events: the handler's result is awaited; a failure rejects (the entry stays pending).
   * Requests (`send`): the handler's values and errors (a value the serializer refuses is
   * one) are written to the caller's reply stream; only a reply Redis refused rejects.
   */
  private dispatch(commands: StreamCommands, pattern: string, entry: DecodedEntry, ctx: RedisStreamsContext): Promise<unknown> {
    // Patterns are stream keys, already normalized: a direct lookup (Nest's getHandlerByPattern
    // first tries JSON.parse, which throws for every plain key: a quarter of the drain's CPU).
    const handler = this.messageHandlers.get(pattern);
    const { request } = entry;
    if (!request) {
      if (!handler) return Promise.reject(new Error(`no handler for pattern "${pattern}"`));
      // The hot path: no tracing hooks installed, so no wrapper, closure or async frame per entry.
      if (!this.hooksInstalled()) return Promise.resolve(handler(entry.payload, ctx)).then(resultOf);
      return this.runInHooks(ctx, () => Promise.resolve(handler(entry.payload, ctx)).then(resultOf));
    }
    const reply = async (packet: WritePacket) => {
      const fields = await encodeReply(request.correlationId, packet, this.options.serializer).catch((err: unknown) => {
        // writeReplies answers the caller with this error instead; the request is then acked.
        if (err instanceof UnserializableResult)
          this.logger.error(`request ${ctx.getId()} of "${ctx.getStream()}": ${err.message}; answered with an error`);
        throw err;
      });
      try {
        await commands.reply(request.replyTo, fields, this.options.replyTtlMs);
      } catch (err) {
        throw new RedisWriteError(`reply to "${request.replyTo}" for entry ${ctx.getId()} of "${ctx.getStream()}"`, err);
      }
    };
    if (!handler || handler.isEventHandler) return reply({ err: NO_MESSAGE_HANDLER, isDisposed: true });
    return this.runInHooks(ctx, async () => writeReplies(await this.produce(handler, entry.payload, ctx), reply));
  }

  /** A batch handler: called once with every entry; resolves with its result (a returned BatchFailure counts). */
  private dispatchBatch(pattern: string, entries: StreamBatchEntry[], ctx: RedisStreamsBatchContext): Promise<unknown> {
    const handler = this.messageHandlers.get(pattern);
    if (!handler) return Promise.reject(new Error(`no handler for pattern "${pattern}"`));
    return this.runInHooks(ctx, () => Promise.resolve(handler(entries, ctx)).then(resultOf));
  }

  /** A request handler's values; Nest's RPC proxy already turned a throw into an erroring stream. */
  private async produce(handler: MessageHandler, payload: unknown, ctx: RedisStreamsContext) {
    try {
      return this.transformToObservable(await handler(payload, ctx));
    } catch (err) {
      return throwError(() => err);
    }
  }

  private hooksInstalled(): boolean {
    return this.onProcessingStartHook !== this.defaultStartHook || this.onProcessingEndHook !== undefined;
  }

  /** Runs `body` between Nest's processing start and end hooks (tracing); settles with `body`. */
  private runInHooks(ctx: RedisStreamsContext | RedisStreamsBatchContext, body: () => Promise<unknown>): Promise<unknown> {
    if (!this.hooksInstalled()) return body();
    return new Promise<unknown>((resolve, reject) => {
      const started: unknown = this.onProcessingStartHook(this.transportId, ctx, async () => {
        try {
          resolve(await body());
        } catch (err) {
          reject(err);
        } finally {
          this.onProcessingEndHook?.(this.transportId, ctx);
        }
      });
      // A hook may return the promise of `done`; its failure is ours, not an unhandled rejection.
      if (started instanceof Promise) started.catch(reject);
    });
  }
}
