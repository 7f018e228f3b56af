import type { Observable } from 'rxjs';
import type { Cluster, Redis } from 'ioredis';
import { secretsOf } from '../options/connection.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import { consumerConnectionName } from '../redis/connection/connection-name.js';
import { openCommandLane } from '../redis/connection/command-lane.js';
import { describeFeatures } from '../redis/server-features.js';
import { StreamCommands } from '../redis/stream-commands.js';
import { DurableOwnershipCommands } from '../redis/tenure/durable-ownership-commands.js';
import type { RedisStreamsStatus } from '../status.js';
import { HealthProbe } from '../health/health-probe.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { loadOtelApi } from '../telemetry/otel-api.js';
import { ConnectionWatch } from './connection-watch.js';
import type { DispatchPort } from './dispatch-port.js';
import { EngineEvents } from './engine-events.js';
import { guardLogger } from '../guarded-logger.js';
import { EngineRun } from './engine-run.js';
import type { RedisStreamsEvents } from './events.js';
import { startHygiene } from './hygiene.js';
import { RateLimitNotice } from '../consumer/upkeep/rate-limit-notice.js';
import type { RateLimit } from '../options/rate-limit-options.js';
import type { StreamPlan } from './plan.js';
import { Reader } from '../consumer/reader.js';
import { deciderOf } from './decider.js';
import { logStopping, untilInterrupted, type CloseInterrupt } from './shutdown.js';
import { StartupGate } from './startup-gate.js';
import { PauseCommands } from '../redis/intake/pause-commands.js';
import { warnStrays } from './strays.js';
import { PauseAnnouncer } from '../consumer/intake/pause-announcer.js';
import { startTelemetry } from './telemetry.js';

const CLOSED_BEFORE_START = 'nestjs-redis-streams: closed before it started';

/**
 * The consumer without Nest: reads a {@link StreamPlan}'s streams (one reader per slot, one per
 * batch handler), opens its handlers only once every reader's groups exist, and calls them
 * through a {@link DispatchPort}. `close()` is terminal. Its parts: the events ({@link EngineEvents}), the
 * connections' watch (status, log, what failures decide: {@link ConnectionWatch}) and what a start
 * opened ({@link EngineRun}).
 */
export class StreamEngine {
  private readonly events: EngineEvents;
  private readonly logger: Logger;
  private readonly watch: ConnectionWatch;
  /** Connection states, then `closing` and `closed`. */
  readonly status$: Observable<RedisStreamsStatus>;
  /** What start() opened; undefined before, and while it looks for OpenTelemetry. */
  private run: EngineRun | undefined;
  private closing: Promise<void> | undefined;
  private pauses: PauseAnnouncer | undefined;
  /** start() was called (it may not have opened anything yet). */
  private startCalled = false;
  /** The streams each pattern reads (its partitions, or its one key), from start()'s plan. */
  private readonly streamsOf = new Map<string, string[]>();

  constructor(
    readonly options: Readonly<ResolvedServerOptions>,
    private readonly dispatch: DispatchPort,
    logger: Logger,
    /** What ends close()'s wait early: the host's (Nest: a second SIGTERM/SIGINT; StreamConsumer: its AbortSignal). */
    private readonly interrupt: CloseInterrupt,
  ) {
    // A logger that throws fails the line, never the step that logged it.
    this.logger = logger = guardLogger(logger);
    this.events = new EngineEvents(logger, secretsOf(options.connection));
    this.watch = new ConnectionWatch(options, logger, this.events, () => void this.close());
    this.status$ = this.watch.status$;
  }

  /** Resolves once every reader's groups exist; rejects (scrubbed) with what kept it from starting. */
  async start(plan: StreamPlan): Promise<void> {
    if (this.closing) throw new Error(CLOSED_BEFORE_START);
    this.startCalled = true;
    for (const [stream, { pattern }] of plan.origins) this.streamsOf.set(pattern, [...(this.streamsOf.get(pattern) ?? []), stream]);
    const { options, watch } = this;
    // OpenTelemetry found (or found missing) before anything opens: the decider is made once, before any
    // reader, and every entry is reported alike. Closed meanwhile: nothing was opened.
    const api = options.telemetry ? await loadOtelApi() : undefined;
    if (this.closing) throw new Error(CLOSED_BEFORE_START);
    const name = consumerConnectionName(options.group, options.consumer);
    // Filled below, once the decider exists: what the parts call back (the gate's deadline, the probe, a
    // connection's error) comes once Redis answers, or fails to, after every reader is in it.
    const readers: Reader[] = [];
    const gate: StartupGate = new StartupGate({
      startupTimeoutMs: options.startupTimeoutMs,
      where: watch.where,
      secrets: watch.secrets,
      readers: plan.readers.length,
      connectionsDown: () => readers.some((r) => !r.lanes.ready()),
      onTimeout: (error) => watch.failStart(gate, error),
    });
    const laneFailed = (_lane: string, failure: Error) => watch.laneFailed(failure, gate);
    // One command connection (on a cluster, one ioredis Cluster) serves every reader.
    const command = openCommandLane(options.connection, name, laneFailed, options.commandTimeoutMs, watch.laneRetry);
    const commands = new StreamCommands(command.conn, options.group, watch.onCluster, options.deadLetterRetention);
    // Durable acks wait on a connection of their own: a wait never holds the command connection the other readers share.
    // Its commands' deadline: the longest wait asked for, past commandTimeoutMs (a frozen Redis fails them no later).
    const longestWaitMs = Math.max(0, ...plan.readers.map((r) => r.ordered?.durableAcks?.timeoutMs ?? 0));
    const durableLane =
      longestWaitMs > 0
        ? openCommandLane(options.connection, `${name}:durable`, laneFailed, options.commandTimeoutMs + longestWaitMs, watch.laneRetry)
        : undefined;
    const durable = durableLane && new DurableOwnershipCommands(durableLane.conn, options.group, watch.onCluster);
    const probe = new HealthProbe({
      group: options.group,
      consumer: options.consumer,
      streams: plan.streams,
      patternOf: (stream) => plan.origins.get(stream)?.pattern,
      commands,
      deadLetterKey: (stream) => (options.deadLetterStream ? options.deadLetterStream(stream) : undefined),
      readers: () =>
        readers.map((r) => ({
          streams: r.streams,
          vitals: r.vitals(),
          features: r.features,
          ordering: r.tenureView(),
          delayed: (s: string) => r.delayed(s),
          paused: (s: string) => r.paused(s),
        })),
      state: () => (this.closing ? 'stopped' : gate.isOpen ? 'running' : 'starting'),
    });
    const handlers = {
      source: () => new Map(readers.flatMap((r) => [...r.vitals().handlers])),
      streams: plan.streams,
      durability: () =>
        new Map(
          readers.flatMap((r) => {
            const o = r.tenureView();
            return o?.owned && o.durability ? [[r.streams[0]!, o.durability.state] as const] : [];
          }),
        ),
    };
    const telemetry = api && startTelemetry(api, options, probe.stats, handlers, this.logger);
    const decider = deciderOf(options, plan, { commands, dispatch: this.dispatch, logger: this.logger, telemetry });
    const pauses = (this.pauses = pauseAnnouncerOf(options, plan, this.logger));
    readers.push(
      ...plan.readers.map(
        (set) =>
          new Reader(set, {
            options,
            commands,
            decider,
            logger: this.logger,
            lanes: { command, name, readers: plan.readers.length, onError: laneFailed, onRetry: watch.laneRetry },
            report: {
              settled: (event) => {
                telemetry?.settled(event);
                this.events.settled(event);
              },
              deleted: this.events.deleted,
              failed: (error, retryInMs) => watch.loopFailed(error, retryInMs, gate, command),
              ready: (reader) => gate.readerReady(reader) && this.started(plan, this.run!, commands),
              stepped: watch.answered,
              checks: watch.checks,
            },
            onCluster: watch.onCluster,
            started: gate.opened,
            durable,
            announcePause: (stream, paused) => pauses.tell(stream, paused),
          }),
      ),
    );
    this.run = new EngineRun(command, gate, readers, probe, telemetry, durableLane);
    watch.follow(
      readers.map((r) => r.lanes.state$),
      probe,
    );
    return gate.outcome;
  }

  /** Every reader has its groups: the start succeeded. */
  private started(plan: StreamPlan, run: EngineRun, commands: StreamCommands): void {
    const { options } = this;
    const lanesNote = plan.readers.length > 1 ? ` (${plan.readers.length} slot readers)` : '';
    this.logger.log(
      `consumer "${options.consumer}" of group "${options.group}" reading ${plan.streams.map((s) => `"${s}"`).join(', ')}${lanesNote}`,
    );
    const features = run.readers.map((r) => r.features).find((f) => f !== undefined);
    if (features) this.logger.log(describeFeatures(features));
    void warnStrays(commands, plan.strays, this.logger);
    if (this.closing) return;
    run.started(
      startHygiene(options, plan.streams, commands, this.logger, this.events.consumersDeleted),
      this.rateLimitNotice(plan, commands),
    );
  }

  /** The rate-limited patterns' limits, written for the dashboard while this engine runs; undefined when none has one. */
  private rateLimitNotice(plan: StreamPlan, commands: StreamCommands): RateLimitNotice | undefined {
    const { options } = this;
    const limits = new Map<string, RateLimit>();
    for (const { pattern, rateLimit, keyRateLimit } of plan.origins.values()) {
      const limit = rateLimit ?? keyRateLimit;
      if (limit) limits.set(options.keyPrefix + pattern, limit);
    }
    if (limits.size === 0) return undefined;
    return new RateLimitNotice({
      limits,
      commands: commands.rateLimits,
      everyMs: options.leaseRenewMs,
      ttlMs: options.minIdleMs,
      logger: this.logger,
    });
  }

  /** See `RedisStreamsServer.health`. */
  async health(options: { maxStatsAgeMs?: number; stats?: boolean } = {}): Promise<RedisStreamsHealth> {
    if (this.run) return this.run.probe.snapshot(options);
    const state = this.closing ? 'stopped' : 'starting';
    return {
      state,
      group: this.options.group,
      consumer: this.options.consumer,
      redisDownForMs: 0,
      streams: [],
      patterns: [],
      statsAgeMs: undefined,
    };
  }

  /**
   * Pauses `pattern` for the whole group (every worker, this one included, starts nothing new of
   * it within `flowCheckMs`; this one at once): each of its streams' flags (a partitioned pattern's
   * partitions; a pattern this consumer does not handle, the key `keyPrefix + pattern`). True if any
   * was running. `resume` undoes it.
   */
  async pause(pattern: string, by = `consumer ${this.options.consumer}`): Promise<boolean> {
    const run = this.runOrFail('pause');
    const pauses = new PauseCommands(run.command.conn);
    const changed = await Promise.all(this.patternStreams(pattern).map((stream) => pauses.pause(stream, this.options.group, by)));
    await run.lookAtPauses();
    return changed.includes(true);
  }

  /** Resumes `pattern` for the whole group: true if any of its streams was paused. */
  async resume(pattern: string): Promise<boolean> {
    const run = this.runOrFail('resume');
    const pauses = new PauseCommands(run.command.conn);
    const changed = await Promise.all(this.patternStreams(pattern).map((stream) => pauses.resume(stream, this.options.group)));
    await run.lookAtPauses();
    return changed.includes(true);
  }

  private patternStreams(pattern: string): string[] {
    return this.streamsOf.get(pattern) ?? [this.options.keyPrefix + pattern];
  }

  private runOrFail(what: string): EngineRun {
    if (!this.run || this.closing)
      throw new Error(`nestjs-redis-streams: ${what}: the consumer is not running (call it after start, before close)`);
    return this.run;
  }

  /** `[command, blocking…]` connections; undefined before `start`. */
  connections(): [Redis | Cluster, ...Redis[]] | undefined {
    return this.run?.connections();
  }

  on<K extends keyof RedisStreamsEvents>(event: K, callback: RedisStreamsEvents[K]): this {
    this.events.on(event, callback);
    return this;
  }

  /**
   * Resolves once the entry in hand is settled (or abandoned after `shutdownTimeoutMs`) and
   * every connection is closed. Terminal: nothing of the engine runs after it.
   */
  close(): Promise<void> {
    return (this.closing ??= this.shutDown());
  }

  private async shutDown(): Promise<void> {
    const { run } = this;
    // `start` must answer: an app closed while still starting gets an error, not silence.
    run?.gate.fail(new Error(CLOSED_BEFORE_START));
    if (!run) {
      // Closed while start() looked for OpenTelemetry: nothing was opened, but a start was under way.
      if (this.startCalled) {
        this.watch.closing();
        this.watch.closed();
        this.logger.log(`consumer "${this.options.consumer}" stopped`);
      }
      return;
    }
    this.watch.closing();
    const { consumer, shutdownTimeoutMs } = this.options;
    // A start that failed or was cut short ran no handler: nothing to say of what is in hand.
    if (run.gate.isOpen) logStopping(this.logger, this.options, run.running());
    await run.stop();
    // The host's interrupt (a second signal, an abort) while handlers run ends the wait; what is in hand stays pending.
    const inHand = run.gate.isOpen && run.holdsEntries();
    await untilInterrupted(inHand, this.interrupt, async (interrupted) => {
      await run.end(shutdownTimeoutMs, interrupted, this.logger);
      this.pauses?.flush();
      this.watch.closed();
      this.logger.log(`consumer "${consumer}" stopped`);
    });
  }
}

/** One pause line per pattern: a stream's name is its pattern's (with `keyPrefix`), its partition among the pattern's. */
function pauseAnnouncerOf(options: ResolvedServerOptions, plan: StreamPlan, logger: Logger): PauseAnnouncer {
  const streamsOf = new Map<string, string[]>();
  const partitionsOf = new Map<string, Set<number>>();
  for (const [stream, o] of plan.origins) {
    streamsOf.set(o.pattern, [...(streamsOf.get(o.pattern) ?? []), stream]);
    if (o.partition !== undefined) partitionsOf.set(o.pattern, (partitionsOf.get(o.pattern) ?? new Set()).add(o.partition));
  }
  return new PauseAnnouncer({
    group: options.group,
    logger,
    windowMs: options.flowCheckMs,
    streamOf: (stream) => {
      const o = plan.origins.get(stream);
      if (!o) return { name: stream, partitions: 1, siblings: [stream] };
      const siblings = streamsOf.get(o.pattern)!;
      return { name: options.keyPrefix + o.pattern, partition: o.partition, partitions: partitionsOf.get(o.pattern)?.size ?? 1, siblings };
    },
  });
}
