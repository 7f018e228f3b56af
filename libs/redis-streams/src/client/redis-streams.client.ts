import { Logger } from '@nestjs/common';
import { ClientProxy, type ReadPacket, type WritePacket } from '@nestjs/microservices';
import type { Cluster, Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { firstValueFrom, filter, map, merge, Subject, tap, timeout, type Observable, type Subscription } from 'rxjs';
import { guardLogger } from '../guarded-logger.js';
import { newReplyStream } from '../codec/reply-stream.js';
import { FIELD } from '../codec/wire-format.js';
import { resolveClientOptions, type RedisStreamsClientOptions, type ResolvedClientOptions } from '../options/client-options.js';
import { ConnectionReport } from '../redis/connection/connection-report.js';
import { Lanes } from '../redis/connection/lanes.js';
import { ProducerCommands } from '../redis/produce/producer-commands.js';
import {
  isCommandTimeout,
  isConnectionLoss,
  isErrorReply,
  isKeyOutOfReach,
  isRetryable,
  lastClusterAnswer,
  nodeCause,
} from '../redis/replies/redis-errors.js';
import { describeError } from '../describe-error.js';
import { escapeControl } from '../escape-control.js';
import { describeConnection, isCluster, secretsOf } from '../options/connection.js';
import { IdmpWindows, type OnceAppended, type OnceWrite } from '../redis/produce/idempotent-add.js';
import { describeFeatures, withoutNewerCommands, type ServerFeatures } from '../redis/server-features.js';
import { redactError, RedisStreamsError } from '../redact.js';
import { within } from '../within.js';
import type { RetentionPolicy } from '../options/retention-options.js';
import { RedisStreamsStatus } from '../status.js';
import { STATUS_OF_LANES } from '../redis/connection/lane-status.js';
import { dueTimeOf, RedisStreamsRecord } from './record.js';
import { newScheduleId } from './schedule-id.js';
import { DelayedCommands, type DueTime } from '../redis/upkeep/delayed-commands.js';
import { closeCommandLane, openCommandLane, type CommandLane } from '../redis/connection/command-lane.js';
import { DurableWrites, type DurableResult } from '../redis/produce/durable-writes.js';
import { NotDurableError } from '../redis/produce/not-durable-error.js';
import { confirms, type RawCommand } from '../redis/produce/replication-wait.js';
import { parseScheduleReply } from '../redis/replies/replies.js';
import { MAX_DURABILITY_TIMEOUT_MS, resolveDurability, type ResolvedDurability } from '../options/durability-options.js';
import { partitionKey, partitionKeys, partitionOf } from '../partitions.js';
import { priorityStreamOf } from '../key-names.js';
import { ReplyReader } from './reply-reader.js';
import { Schedules, type ScheduleInfo, type SetScheduleResult, type UnreadableSchedule } from '../redis/upkeep/schedules.js';
import { checkScheduleId, resolveSchedule, type ScheduleSpec } from '../options/schedule-options.js';
import { InvalidOptionError } from '../options/validate.js';
import { MAX_PRIORITY_LEVELS } from '../options/priority-options.js';
import { watchUnobserved } from './unobserved.js';
import { loadOtelApi, type OtelApi } from '../telemetry/otel-api.js';
import { ProducerTelemetry } from '../telemetry/producer-telemetry.js';

/** What a connection refusal that needs a human tells the writes waiting for the connection. */
const REFUSED = 'refused';

/** What an emit or send after close() fails with. */
function clientClosed(): RedisStreamsError {
  return redactError(new Error('nestjs-redis-streams: client closed: close() was called; emit and send need a new client'));
}

/** A pattern's repeatable schedules, through the client (docs/guide/schedules.md). */
export interface ClientSchedules {
  /** Creates or updates schedule `id` of `pattern`; resolves with its next fire (Unix ms, Redis' clock). */
  set<T = unknown>(pattern: string, id: string, spec: ScheduleSpec<T>): Promise<SetScheduleResult>;
  /** Removes it (and a fire of it still waiting): true if it existed. */
  remove(pattern: string, id: string): Promise<boolean>;
  get(pattern: string, id: string): Promise<ScheduleInfo | UnreadableSchedule | undefined>;
  /** Every schedule of the pattern (of each partition, on a partitioned one). */
  list(pattern: string): Promise<(ScheduleInfo | UnreadableSchedule)[]>;
}

/** Events of `client.on(...)`. */
export interface RedisStreamsClientEvents {
  /** A connection error (ioredis reconnects by itself). */
  error: (error: Error) => void;
  [event: string]: (...args: any[]) => void;
}

/**
 * Nest `ClientProxy` over Redis Streams.
 * `emit(pattern, data)`: XADD to stream `keyPrefix + pattern`; emits the entry id once Redis has it.
 * `send(pattern, data)`: a request entry whose `@MessagePattern` handler replies on this client's
 * reply stream; emits each reply value, in order.
 * Wrap `data` in a {@link RedisStreamsRecord} to attach headers.
 */
// Generic defaults on purpose: `ClientsModule.register({ customClass })` wants a plain `Type<ClientProxy>`.
export class RedisStreamsClient extends ClientProxy {
  readonly options: Readonly<ResolvedClientOptions>;
  // An app logger that throws costs the line, never the emit or the subscriber's callback (guarded-logger.ts).
  private readonly logger = guardLogger(new Logger(RedisStreamsClient.name));
  private readonly events = new EventEmitter();
  private lanes: Lanes | undefined;
  private commands: ProducerCommands | undefined;
  private delayed: DelayedCommands | undefined;
  private scheduleStore: Schedules | undefined;
  /** `client.schedules`: a pattern's repeatable schedules. */
  readonly schedules: ClientSchedules = {
    set: (pattern, id, spec) => this.setSchedule(pattern, id, spec),
    remove: (pattern, id) =>
      this.onSchedules(pattern, id, 'removing a schedule of', (s, stream) => s.remove(stream, id)).then((r) => r.some(Boolean)),
    get: (pattern, id) =>
      this.onSchedules(pattern, id, 'reading a schedule of', (s, stream) => s.get(stream, id)).then((r) => r.find((x) => x !== undefined)),
    list: (pattern) =>
      this.onSchedules(pattern, undefined, 'listing the schedules of', (s, stream) => s.list(stream)).then((r) => r.flat()),
  };
  private replies: ReplyReader | undefined;
  private laneStatus: Subscription | undefined;
  /** Next round-robin partition per partitioned pattern. */
  private readonly nextPartition = new Map<string, number>();
  /** This client's reply stream. */
  readonly replyStream: string;
  /** `@opentelemetry/api`, once `connect()` looked for it (undefined: absent, or `telemetry: false`). */
  private api: OtelApi | undefined;
  private producerTelemetry: ProducerTelemetry | undefined;
  private apiLookedFor = false;
  /** The last connection error, scrubbed: the reason an XADD that found no connection gives. */
  private lastLaneError: Error | undefined;
  /** A connection error no retry cures (WRONGPASS, NOAUTH, a port that is no Redis): writes waiting for the connection fail at once. */
  private readonly refusals = new Subject<typeof REFUSED>();
  /** close() was called: terminal, nothing is sent and no connection is opened again. */
  private closed = false;
  /** emits and writes begun before close(), which it lets finish on the open connections. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** What the server offers (server-features.ts), found once per connection: set by detectFeatures() alone. */
  private features: Promise<ServerFeatures> | undefined;
  private featureWatch: Subscription | undefined;
  /** Each stream's IDMP window, set once per connection (Redis 8.6). */
  private idmpWindows: IdmpWindows | undefined;
  /** The fallback was taken because COMMAND was refused: said once per connection, at its first idempotent write. */
  private lookupErrorTold = false;
  /** Durable writes' own connection (opened at the first one), so that their waits never hold the command connection. */
  private durableLane: CommandLane | undefined;
  private durableWrites: DurableWrites | undefined;
  /** What a connection error tells (set by connect()): the durable lane reports through it too. */
  private onLaneError: ((lane: string, err: Error) => void) | undefined;

  constructor(options: RedisStreamsClientOptions = {}) {
    super();
    this.options = resolveClientOptions(options);
    this.replyStream = newReplyStream(this.options.keyPrefix);
  }

  /** Opens the connections (once); each command then waits for them up to `commandTimeoutMs`. Fails after close(). */
  async connect(): Promise<void> {
    if (this.closed) throw clientClosed();
    if (this.options.telemetry && !this.apiLookedFor) {
      this.apiLookedFor = true;
      this.api = await loadOtelApi();
      if (this.api) this.producerTelemetry ??= new ProducerTelemetry(this.api);
    }
    // Closed meanwhile and done closing: nothing may open connections again.
    if (this.closed && !this.lanes) throw clientClosed();
    if (!this.lanes) {
      // One log line per change of the connections' state, not one per reconnect attempt.
      const report = new ConnectionReport(this.where(), this.logger, this.options.commandTimeoutMs);
      const onError = (this.onLaneError = (_lane: string, failure: Error) => {
        // On a cluster, the node's own answer (a wrong password's WRONGPASS): a refusal is told, and fails the emits, at once.
        const err = nodeCause(failure);
        // ioredis' error carries the handshake's AUTH arguments: only a scrubbed copy leaves.
        this.lastLaneError = redactError(err, undefined, secretsOf(this.options.connection));
        if (!isRetryable(err)) this.refusals.next(REFUSED);
        const safe = redactError(err, this.where(), secretsOf(this.options.connection));
        report.failed(this.lastLaneError);
        if (this.events.listenerCount('error') > 0) this.events.emit('error', safe);
      });
      const lanes = (this.lanes = new Lanes({
        connection: this.options.connection,
        name: `client:${this.replyStream}`,
        onError,
        onRetry: (_lane, delayMs) => report.retrying(delayMs),
        commandTimeoutMs: this.options.commandTimeoutMs,
        // On a cluster, replies are read from the master of the reply stream's slot.
        slotKey: this.replyStream,
        // Its replies' connection opens with the first send on a cluster: the status does not wait for it.
        blockingOnDemand: true,
      }));
      this.laneStatus = lanes.state$
        .pipe(
          tap((state) => report.stateChanged(state)),
          map((s) => STATUS_OF_LANES[s]),
        )
        .subscribe((s) => this._status$.next(s));
      this.commands = new ProducerCommands(lanes.command);
      this.delayed = new DelayedCommands(lanes.command, isCluster(this.options.connection));
      this.scheduleStore = new Schedules(lanes.command, {
        onCluster: isCluster(this.options.connection),
        serializer: this.options.serializer,
      });
      this.idmpWindows = new IdmpWindows(lanes.command, this.options.idempotency, (b) => {
        if (b.forgotten > 0)
          this.logger.warn(
            `stream "${b.stream}" had an idempotency window of ${b.windowSec} s / ${b.maxKeys} keys (another producer's options, or the server's defaults); set to ${this.options.idempotency.windowSec} s / ${this.options.idempotency.maxKeys} keys, Redis forgot the ${b.forgotten} keys it held: a repeat of those is written again. Give every producer of a stream the same idempotency options.`,
          );
      });
      // Again after every reconnect: it may be to another server (a failover, an upgrade).
      this.featureWatch = lanes.commandState$.pipe(filter((s) => s === 'ready')).subscribe(() => this.detectFeatures());
      this.replies = new ReplyReader({
        lanes,
        commands: this.commands,
        key: this.replyStream,
        blockMs: this.options.replyBlockMs,
        ttlMs: this.options.replyTtlMs,
        deserializer: this.options.deserializer,
        logger: this.logger,
        toldElsewhere: (err) => report.covers(err, isRetryable(err)),
        detached: (start) => {
          const api = this.api;
          return api ? api.context.with(api.ROOT_CONTEXT, start) : start();
        },
      });
    }
  }

  /**
   * Terminal: later emits and sends fail ("client closed"). Writes begun before it finish on the
   * open connections (waited for up to `commandTimeoutMs`); then requests still waiting for a
   * reply fail, the reply stream is deleted and both connections close.
   */
  async close(): Promise<void> {
    this.closed = true;
    await within(Promise.allSettled([...this.inFlight]), this.options.commandTimeoutMs, undefined);
    const lanes = this.lanes;
    if (!lanes) return;
    this.lanes = undefined;
    await this.replies?.close();
    const durable = this.durableLane;
    this.durableLane = this.durableWrites = undefined;
    await Promise.all([lanes.close(), durable && closeCommandLane(durable)]);
    this.laneStatus?.unsubscribe();
    this.featureWatch?.unsubscribe();
    this._status$.next(RedisStreamsStatus.CLOSED);
  }

  override on(event: 'error', callback: RedisStreamsClientEvents['error']): void;
  override on(event: string, callback: (...args: any[]) => void): void {
    this.events.on(event, callback);
  }

  /**
   * Cancels a delayed entry still waiting (`emit` with `delayMs`/`deliverAt` emitted its id): true
   * if it was waiting and now never will be delivered; false once it was moved into the stream (too
   * late: its handlers may run), cancelled already, or unknown. Every schedule it may wait in is looked
   * at: every partition's, and at each every priority level's (a record emitted with a `priority` waits
   * in its level's; a key emitted at two levels is cancelled at both). A schedule whose keys this
   * connection may not reach (an ACL by exact key) is passed over, unless none is reachable; any other
   * refusal fails the call.
   */
  async cancelScheduled(pattern: string, id: string): Promise<boolean> {
    if (typeof id !== 'string' || id === '') throw new TypeError('cancelScheduled: id must be the non-empty id emit gave');
    await this.connect();
    const bases = this.streamsOfPattern(pattern);
    // The client does not know a pattern's levels (a worker's option): all of them, in one round of small scripts.
    const onCluster = isCluster(this.options.connection);
    const streams = bases.flatMap((base) =>
      Array.from({ length: MAX_PRIORITY_LEVELS }, (_, level) => priorityStreamOf(base, level, onCluster)),
    );
    return this.whenReady(
      bases[0]!,
      'cancelling a delayed entry of',
      async () => {
        const looks = await Promise.allSettled(streams.map((stream) => this.delayed!.cancel(stream, id, this.options.producerId)));
        if (looks.some((l) => l.status === 'fulfilled' && l.value)) return true;
        const refused = looks.filter((l): l is PromiseRejectedResult => l.status === 'rejected');
        const failure = refused.find((l) => !isKeyOutOfReach(l.reason)) ?? (refused.length === looks.length ? refused[0] : undefined);
        if (failure) throw failure.reason;
        return false;
      },
      // Sent and not answered: it runs when Redis gets to it, and a retry then answers false.
      'the cancel may or may not have taken effect (if it did, a retry answers false)',
    );
  }

  /** The streams a pattern's schedules may be in: its stream, or every partition of a partitioned one. */
  private streamsOfPattern(pattern: string): string[] {
    const partitions = this.options.partitions[pattern];
    return partitions === undefined ? [this.options.keyPrefix + pattern] : partitionKeys(this.options.keyPrefix, pattern, partitions);
  }

  /**
   * A schedule lives in its pattern's stream; on a partitioned pattern in the partition its partition key (else its id)
   * routes to, as a record's, and a set removes it from the others (its partition key may have changed).
   */
  private async setSchedule(pattern: string, id: string, spec: ScheduleSpec): Promise<SetScheduleResult> {
    if (typeof pattern !== 'string' || pattern === '') throw new TypeError('schedules.set: pattern must be a non-empty string');
    checkScheduleId(id);
    const resolved = resolveSchedule(spec);
    await this.connect();
    const partitions = this.options.partitions[pattern];
    const stream =
      partitions === undefined
        ? this.options.keyPrefix + pattern
        : partitionKey(this.options.keyPrefix, pattern, partitionOf(resolved.partitionKey ?? id, partitions));
    // An option found bad only now (the payload's size, no fire left) is told as itself, not as a failed write.
    const done = await this.whenReady(stream, 'setting a schedule of', async () => {
      for (const other of this.streamsOfPattern(pattern)) if (other !== stream) await this.scheduleStore!.remove(other, id);
      return this.scheduleStore!.set(stream, id, spec).catch((err: unknown) => {
        if (err instanceof InvalidOptionError) return err;
        throw err;
      });
    });
    if (done instanceof InvalidOptionError) throw done;
    return done;
  }

  private async onSchedules<T>(
    pattern: string,
    id: string | undefined,
    doing: string,
    each: (s: Schedules, stream: string) => Promise<T>,
  ): Promise<T[]> {
    if (typeof pattern !== 'string' || pattern === '') throw new TypeError('schedules: pattern must be a non-empty string');
    if (id !== undefined) checkScheduleId(id);
    await this.connect();
    const streams = this.streamsOfPattern(pattern);
    return this.whenReady(streams[0]!, doing, () => Promise.all(streams.map((stream) => each(this.scheduleStore!, stream))));
  }

  /** `[command, blocking]` ioredis connections (on a cluster, the command one is an ioredis `Cluster`). */
  unwrap<T = [Redis | Cluster, Redis]>(): T {
    if (!this.lanes) throw new Error('Not initialized. Please call the "connect" method first.');
    return [this.lanes.command, this.lanes.blocking] as T;
  }

  /**
   * Nest's `emit`, hot as Nest makes it (it writes without a subscriber), plus a log line for a
   * failure nobody subscribed to: in the fire-and-forget style of Nest's examples it would
   * otherwise leave no trace. A caller who subscribes gets the error and no log line.
   */
  override emit<TResult = any, TInput = any>(pattern: any, data: TInput): Observable<TResult> {
    const hot = super.emit<TResult, TInput>(pattern, data);
    // Begun before close(): close() lets it finish (Nest's emit is already running).
    this.track(new Promise<void>((done) => hot.subscribe({ complete: done, error: () => done() })));
    return watchUnobserved(hot, (err) => this.logger.error(`an emit nobody subscribed to failed: ${describeError(err)}`));
  }

  protected async dispatchEvent<T = string>(packet: ReadPacket): Promise<T> {
    return (await this.write(packet)) as T;
  }

  private track(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(settled);
    void settled.then(() => this.inFlight.delete(settled));
  }

  protected publish(packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    const correlationId = randomUUID();
    const unregister = this.replies!.register(correlationId, callback);
    this.write(packet, correlationId).catch((err: unknown) => {
      unregister();
      callback({ err, isDisposed: true });
    });
    return unregister;
  }

  /** Encodes and appends one entry (a request when `correlationId` is set), inside a `send` span when OpenTelemetry is there. */
  private async write(packet: ReadPacket, correlationId?: string): Promise<string> {
    const record = packet.data instanceof RedisStreamsRecord ? packet.data : new RedisStreamsRecord(packet.data);
    const pattern = this.normalizePattern(packet.pattern);
    const stream = this.streamOf(pattern, record);
    const key = record.options.idempotencyKey;
    const orderingKey = record.options.partitionKey ?? this.options.partitionKey?.(pattern, record.data);
    const due = dueTimeOf(record.options);
    const durability =
      record.options.durability === undefined ? this.options.durability : resolveDurability('durability', record.options.durability);
    if (record.options.priority && correlationId !== undefined)
      throw new Error(
        `nestjs-redis-streams: send to "${pattern}": a request cannot carry a priority (priorities are for event handlers); emit an event instead`,
      );
    if (due && correlationId !== undefined)
      throw new Error(
        `nestjs-redis-streams: send to stream "${stream}": a request cannot be delayed (its caller waits for the reply); emit a delayed event instead`,
      );
    const append = async (traceHeaders?: Record<string, string>) => {
      const fields = await this.encode(stream, record, traceHeaders);
      // On every stream, partitioned or not: an ordered pattern reads it (docs/wire-format.md).
      if (typeof orderingKey === 'string') fields.push(FIELD.partitionKey, orderingKey);
      // Waits in the stream's schedule; a worker of the stream moves it in once due. Its id orders it among
      // entries due in the same ms (one producer's, in the order written); an idempotency key names it too.
      if (due) {
        const id = newScheduleId();
        if (durability) await this.scheduleDurably(stream, id, fields, due, durability, key);
        else
          await this.whenReady(stream, 'scheduling an entry of', async () =>
            this.delayed!.schedule(stream, id, fields, due, key === undefined ? undefined : await this.onceWrite(stream, key, undefined)),
          );
        return key ?? id;
      }
      if (correlationId !== undefined) fields.push(FIELD.correlationId, correlationId, FIELD.replyTo, this.replyStream);
      const marker = correlationId === undefined ? undefined : ([FIELD.correlationId, correlationId] as const);
      const { id, repeated } = await this.append(
        stream,
        packet.pattern,
        fields,
        key === undefined ? undefined : { key, marker },
        durability,
      );
      // The first request's replies went to its own sender: this one would wait for nothing.
      if (repeated && correlationId !== undefined)
        throw new Error(
          `nestjs-redis-streams: send to stream "${stream}": idempotency key "${escapeControl(key!)}" was used within the window already (entry ${id}): the request was not written again, and its replies go to the first sender`,
        );
      return id;
    };
    // Called after connect() (Nest's emit and send call it first); never reconnects after close().
    const telemetry = this.producerTelemetry;
    const written = telemetry ? telemetry.send(stream, correlationId, record.headers, append) : append();
    this.track(written);
    return written;
  }

  /**
   * Payload (and headers) → entry fields; an unserializable payload fails here, before anything
   * is written. The trace context's headers replace the record's own of the same name.
   */
  private async encode(stream: string, record: RedisStreamsRecord, traceHeaders: Record<string, string> | undefined): Promise<string[]> {
    let data: string;
    try {
      data = await this.options.serializer.serialize(record.data);
    } catch (err) {
      throw new Error(`nestjs-redis-streams: cannot write to stream "${stream}": ${err instanceof Error ? err.message : String(err)}`, {
        cause: err,
      });
    }
    const fields = [FIELD.data, data];
    const headers = traceHeaders && Object.keys(traceHeaders).length > 0 ? { ...record.headers, ...traceHeaders } : record.headers;
    if (Object.keys(headers).length > 0) fields.push(FIELD.headers, JSON.stringify(headers));
    return fields;
  }

  /**
   * XADD (with the stream's retention) once the connection is up, or a clear error after
   * `commandTimeoutMs`; with `once`, at most one entry per idempotency key in the stream's window.
   */
  private append(
    stream: string,
    pattern: unknown,
    fields: string[],
    once: { key: string; marker: OnceWrite['marker'] } | undefined,
    durability: ResolvedDurability | undefined,
  ): Promise<OnceAppended> {
    return this.whenReady(stream, 'XADD to', async () => {
      const idempotent = once && (await this.onceWrite(stream, once.key, once.marker));
      const policy = this.retentionOf(pattern);
      // A safe trim uses XTRIM … ACKED where the server has it; not told (the lookup failed): the plain script.
      const features = policy?.safe ? await (this.features ?? this.detectFeatures()).catch(() => undefined) : undefined;
      let written: OnceAppended & { trimError?: Error };
      if (durability) {
        const { commands, parse } = this.commands!.addCommands(stream, fields, policy, idempotent, features);
        const { replies, confirmed } = await this.writeDurably(stream, durability, commands);
        written = parse(replies);
        if (!confirms(durability, confirmed)) throw new NotDurableError(stream, written.id, durability, confirmed);
      } else written = await this.commands!.add(stream, fields, policy, idempotent, features);
      const { trimError, ...appended } = written;
      if (trimError) this.logger.warn(`trimming stream "${stream}" failed (the entry was written): ${describeError(trimError)}`);
      return appended;
    });
  }

  /** A delayed entry into the stream's schedule, confirmed on `durability`'s replicas (or NotDurableError). */
  private scheduleDurably(
    stream: string,
    id: string,
    fields: string[],
    due: DueTime,
    durability: ResolvedDurability,
    key: string | undefined,
  ): Promise<void> {
    return this.whenReady(stream, 'scheduling an entry of', async () => {
      const once = key === undefined ? undefined : await this.onceWrite(stream, key, undefined);
      const command = this.delayed!.scheduleCommand(stream, id, fields, due, once);
      const { replies, confirmed } = await this.writeDurably(stream, durability, [command]);
      const [err, reply] = replies[0] ?? [new Error('the schedule script got no reply'), null];
      if (err) throw err;
      parseScheduleReply(reply);
      if (!confirms(durability, confirmed)) throw new NotDurableError(stream, key ?? id, durability, confirmed, 'scheduled');
    });
  }

  /**
   * Sends a durable write's commands on the durable lane (opened at the first one), with the wait
   * after them; refuses WAITAOF before writing anything on a server that has none. Bounded: the
   * wait's own timeout plus commandTimeoutMs.
   */
  private async writeDurably(stream: string, durability: ResolvedDurability, commands: RawCommand[]): Promise<DurableResult> {
    if (durability.fsync) {
      const features = await (this.features ?? this.detectFeatures());
      // Not looked up (COMMAND refused): the wait itself says whether the server has it (NotDurableError, refused).
      if (!features.waitAof && !features.lookupError)
        throw new Error(
          `durability.fsync needs WAITAOF (Redis or Valkey 7.2 or later); this server is ${features.server}: nothing was written`,
        );
    }
    const lane = this.openDurableLane();
    await this.laneReady(lane);
    // Sent, never answered within the bound: whenReady says the entry may or may not have been written; never sent: not written.
    return this.durableWrites!.write(
      stream,
      durability,
      commands,
      AbortSignal.timeout(this.options.commandTimeoutMs + durability.timeoutMs),
    );
  }

  private openDurableLane(): CommandLane {
    if (!this.durableLane) {
      this.durableLane = openCommandLane(
        this.options.connection,
        `client:${this.replyStream}:durable`,
        (lane, err) => this.onLaneError?.(`durable ${lane}`, err),
        // Its commands include waits of up to a minute (durability.timeoutMs' bound); writeDurably bounds each write itself.
        this.options.commandTimeoutMs + MAX_DURABILITY_TIMEOUT_MS,
      );
      this.durableWrites = new DurableWrites(this.durableLane.conn, isCluster(this.options.connection));
    }
    return this.durableLane;
  }

  /** Waits up to commandTimeoutMs for `lane` to be ready, or fails as a write that found no connection does. */
  private async laneReady(lane: CommandLane): Promise<void> {
    if (lane.conn.status === 'ready') return;
    const s = await firstValueFrom(
      merge(lane.state$, this.refusals).pipe(
        filter((x) => x === 'ready' || x === REFUSED),
        timeout(this.options.commandTimeoutMs),
      ),
    ).catch(() => REFUSED);
    if (s === REFUSED) throw new Error(this.noConnection());
  }

  /**
   * Runs a write of `stream` once the connection is up, or fails clearly after `commandTimeoutMs`; errors name what it
   * did (`doing`) and, when it was sent and not answered, what may have happened (`inDoubt`).
   */
  private async whenReady<T>(
    stream: string,
    doing: string,
    write: () => Promise<T>,
    inDoubt = 'the entry may or may not have been written',
  ): Promise<T> {
    // Scrubbed, with the masked URL: the cause may be the handshake's error, AUTH arguments and all.
    const fail = (reason: string, cause?: unknown) =>
      redactError(
        new Error(`nestjs-redis-streams: ${doing} stream "${stream}" failed: ${reason}`, cause === undefined ? undefined : { cause }),
        this.where(),
        secretsOf(this.options.connection),
      );
    const lanes = this.lanes;
    if (!lanes) throw fail('client closed');
    if (lanes.command.status !== 'ready') {
      // Waiting here, not in ioredis' offline queue, means a timed-out entry is never written later.
      // A refusal that needs a human (a wrong password, a port that is no Redis) fails the write at once.
      await firstValueFrom(
        merge(lanes.commandState$, this.refusals).pipe(
          filter((s) => s === 'ready' || s === REFUSED),
          timeout(this.options.commandTimeoutMs),
        ),
      )
        .catch(() => REFUSED)
        .then((s) => {
          if (s === REFUSED) throw fail(this.noConnection(), this.lastLaneError);
        });
    }
    try {
      return await write();
    } catch (err) {
      // Written, not confirmed: its own message says so (and carries no secret).
      if (err instanceof NotDurableError) throw err;
      // Sent, then the connection was cut and never came back in time: Redis may have written it.
      if (isCommandTimeout(err)) {
        // Its master may be frozen or cut off and replaced: the next writes go where a fresh slot map says.
        (lanes.command as Partial<{ refreshAfterTimeout(): void }>).refreshAfterTimeout?.();
        const answer = lastClusterAnswer(err);
        const said = answer ? ` (retried until then, the last error: ${answer.message})` : '';
        throw fail(`no answer within ${this.options.commandTimeoutMs} ms${said}; ${inDoubt}`, err);
      }
      if (isConnectionLoss(err))
        throw fail(`the connection was lost before Redis answered (${this.lastLaneError?.message ?? 'closed'}); ${inDoubt}`, err);
      throw fail(err instanceof Error ? err.message : String(err), err);
    }
  }

  /** Finds what the server offers (once per connection: on ready, or at the first idempotent write before it). */
  private detectFeatures(): Promise<ServerFeatures> {
    this.idmpWindows?.forget();
    this.lookupErrorTold = false;
    const found = this.commands!.serverFeatures().then((f) => (this.options.newerCommands ? f : withoutNewerCommands(f)));
    // A failed lookup (INFO refused, the connection cut) is asked again by the next idempotent write.
    found.catch(() => this.features === found && (this.features = undefined));
    return (this.features = found);
  }

  /** How an idempotent write goes: `XADD … IDMP` with the stream's window set, or the keyed-expiry script. */
  private async onceWrite(stream: string, key: string, marker: OnceWrite['marker']): Promise<OnceWrite> {
    let features: ServerFeatures;
    try {
      features = await (this.features ?? this.detectFeatures());
    } catch (err) {
      throw new Error(`cannot tell whether the server has XADD … IDMP: ${describeError(err)}`, { cause: err });
    }
    if (features.lookupError && !this.lookupErrorTold) {
      this.lookupErrorTold = true;
      this.logger.warn(
        `idempotent writes take the keyed-expiry script: ${describeFeatures(features)}. Grant +command|info +command|docs to use XADD … IDMP where the server has it`,
      );
    }
    const { producerId, idempotency } = this.options;
    if (features.idempotentProduce) await this.idmpWindows!.ensure(stream);
    const onCluster = isCluster(this.options.connection);
    return { producerId, key, windowSec: idempotency.windowSec, native: features.idempotentProduce, marker, onCluster };
  }

  /** Why no connection came within commandTimeoutMs: Redis refused it (WRONGPASS, NOPERM …), or could not be reached. */
  private noConnection(): string {
    const last = this.lastLaneError;
    const within = `within ${this.options.commandTimeoutMs} ms`;
    if (!last) return `no connection to Redis ${within}`;
    if (!isRetryable(last)) return isErrorReply(last) ? `Redis refused the connection (${last.message})` : last.message;
    if (isErrorReply(last)) return `Redis refused the connection (${last.message}); no connection ${within}`;
    return `Redis not reachable ${within}: ${last.message}`;
  }

  private where(): string {
    return describeConnection(this.options.connection);
  }

  /** The stream key of an entry: `keyPrefix + pattern`, or on a partitioned stream the partition its key routes to. */
  private streamOf(pattern: string, record: RedisStreamsRecord): string {
    const base = this.baseStreamOf(pattern, record);
    const { priority } = record.options;
    return priority ? priorityStreamOf(base, priority, isCluster(this.options.connection)) : base;
  }

  /** The stream key of an entry's level 0: `keyPrefix + pattern`, or on a partitioned stream the partition its key routes to. */
  private baseStreamOf(pattern: string, record: RedisStreamsRecord): string {
    const partitions = this.options.partitions[pattern];
    if (partitions === undefined) return this.options.keyPrefix + pattern;
    // An idempotency key routes a record that names no partition key: its repeats meet in one partition's window.
    const key = record.options.partitionKey ?? this.options.partitionKey?.(pattern, record.data) ?? record.options.idempotencyKey;
    let index: number;
    if (key !== undefined) index = partitionOf(key, partitions);
    else {
      // Round-robin from a random start, so that many producers do not all begin on partition 0.
      index = (this.nextPartition.get(pattern) ?? Math.floor(Math.random() * partitions)) % partitions;
      this.nextPartition.set(pattern, index + 1);
    }
    return partitionKey(this.options.keyPrefix, pattern, index);
  }

  private retentionOf(pattern: unknown): RetentionPolicy | undefined {
    return this.options.streamRetention[this.normalizePattern(pattern as string)] ?? this.options.retention;
  }
}
