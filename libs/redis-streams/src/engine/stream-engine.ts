import type { Observable } from 'rxjs';
import type { Cluster, Redis } from 'ioredis';
import type { ConsumerHygiene } from '../consumer/consumer-hygiene.js';
import { decideBatch } from '../consumer/decide-batch.js';
import { settle } from '../consumer/settle.js';
import { secretsOf } from '../options/connection.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import type { RedisConnection } from '../redis/connect.js';
import { consumerConnectionName } from '../redis/connection-name.js';
import { closeCommandLane, openCommandLane, type CommandLane } from '../redis/command-lane.js';
import { StreamCommands } from '../redis/stream-commands.js';
import type { RedisStreamsStatus } from '../status.js';
import { HealthProbe } from '../health/health-probe.js';
import type { RedisStreamsHealth } from '../health/health.js';
import type { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import { loadOtelApi } from '../telemetry/otel-api.js';
import { ConnectionWatch } from './connection-watch.js';
import type { DispatchPort } from './dispatch-port.js';
import { EngineEvents } from './engine-events.js';
import type { RedisStreamsEvents } from './events.js';
import { startHygiene } from './hygiene.js';
import type { StreamPlan } from './plan.js';
import { openReader, type Reader } from './reader.js';
import { settleDepsOf } from './settle-deps.js';
import { logStopping, settleInHand, untilInterrupted, type CloseInterrupt } from './shutdown.js';
import { StartupGate } from './startup-gate.js';
import { warnStrays } from './strays.js';
import { startTelemetry } from './telemetry.js';

const CLOSED_BEFORE_START = 'nestjs-redis-streams: closed before it started';

/**
 * The consumer without Nest: reads a {@link StreamPlan}'s streams (one reader per slot, one per
 * batch handler), opens its handlers only once every reader's groups exist, and calls them
 * through a {@link DispatchPort}. `close()` is terminal.
 */
export class StreamEngine {
  private readonly events: EngineEvents;
  private readonly watch: ConnectionWatch;
  /** Connection states, then `closing` and `closed`. */
  readonly status$: Observable<RedisStreamsStatus>;
  private command: CommandLane | undefined;
  private readers: Reader[] = [];
  private gate: StartupGate | undefined;
  private closing: Promise<void> | undefined;
  /** start() was called (it may not have opened anything yet). */
  private startCalled = false;
  private hygiene: ConsumerHygiene | undefined;
  private probe: HealthProbe | undefined;
  private telemetry: ConsumerTelemetry | undefined;

  constructor(
    readonly options: Readonly<ResolvedServerOptions>,
    private readonly dispatch: DispatchPort,
    private readonly logger: Logger,
    /** What ends close()'s wait early: the host's (Nest: a second SIGTERM/SIGINT; StreamConsumer: its AbortSignal). */
    private readonly interrupt: CloseInterrupt,
  ) {
    this.events = new EngineEvents(logger, secretsOf(options.connection));
    this.watch = new ConnectionWatch(options, logger, this.events, () => void this.close());
    this.status$ = this.watch.status$;
  }

  /** Resolves once every reader's groups exist; rejects (scrubbed) with what kept it from starting. */
  async start(plan: StreamPlan): Promise<void> {
    if (this.closing) throw new Error(CLOSED_BEFORE_START);
    this.startCalled = true;
    const { options, watch } = this;
    // OpenTelemetry found (or found missing) before anything opens: the settler is made once, before any
    // reader, and every entry is reported alike. Closed meanwhile: nothing was opened.
    const api = options.telemetry ? await loadOtelApi() : undefined;
    if (this.closing) throw new Error(CLOSED_BEFORE_START);
    const name = consumerConnectionName(options.group, options.consumer);
    const gate = (this.gate = new StartupGate({
      startupTimeoutMs: options.startupTimeoutMs,
      where: watch.where,
      secrets: watch.secrets,
      readers: plan.readers.length,
      connectionsDown: () => this.readers.some((r) => !r.lanes.ready()),
      onTimeout: (error) => watch.failStart(gate, error),
    }));
    const laneFailed = (_lane: string, failure: Error) => watch.laneFailed(failure, gate);
    // One command connection (on a cluster, one ioredis Cluster) serves every reader.
    const command = (this.command = openCommandLane(options.connection, name, laneFailed, options.commandTimeoutMs, watch.laneRetry));
    const commands = new StreamCommands(command.conn, options.group, watch.onCluster, options.deadLetterRetention);
    this.probe = new HealthProbe({
      group: options.group,
      consumer: options.consumer,
      streams: plan.streams,
      commands,
      deadLetterKey: (stream) => (options.deadLetterStream ? options.deadLetterStream(stream) : undefined),
      readers: () => this.readers.map((r) => ({ streams: r.loop.streams, vitals: r.loop.vitals() })),
      state: () => this.state(),
    });
    const handlers = { source: () => new Map(this.readers.flatMap((r) => [...r.loop.vitals().handlers])), streams: plan.streams };
    const telemetry = (this.telemetry = api && startTelemetry(api, options, this.probe.stats, handlers, this.logger));
    const deps = settleDepsOf(options, plan, {
      commands,
      dispatch: this.dispatch,
      logger: this.logger,
      telemetry,
      stopping: () => this.closing !== undefined,
    });
    this.readers = plan.readers.map((set) =>
      openReader(set, {
        command,
        name,
        readers: plan.readers.length,
        options,
        commands,
        logger: this.logger,
        onLaneError: laneFailed,
        onLaneRetry: watch.laneRetry,
        settle: (entry, source) => settle(deps, entry, source),
        decide: (entries, source) => decideBatch(deps, entries, source),
        onSettled: (event) => {
          telemetry?.settled(event);
          this.events.settled(event);
        },
        onDeleted: this.events.deleted,
        onCluster: watch.onCluster,
        onError: (error, retryInMs) => watch.loopFailed(error, retryInMs, gate, command),
        onReady: (loop) => gate.readerReady(loop) && this.started(plan, command.conn, commands),
        onStep: watch.answered,
        started: gate.opened,
      }),
    );
    watch.follow(
      this.readers.map((r) => r.lanes.state$),
      this.probe,
    );
    return gate.outcome;
  }

  private state(): RedisStreamsHealth['state'] {
    return this.closing ? 'stopped' : this.gate?.isOpen ? 'running' : 'starting';
  }

  /** Every reader has its groups: the start succeeded. */
  private started(plan: StreamPlan, conn: RedisConnection, commands: StreamCommands): void {
    const { options } = this;
    const lanesNote = plan.readers.length > 1 ? ` (${plan.readers.length} slot lanes)` : '';
    this.logger.log(
      `consumer "${options.consumer}" of group "${options.group}" reading ${plan.streams.map((s) => `"${s}"`).join(', ')}${lanesNote}`,
    );
    void warnStrays(conn, plan.strays, this.logger);
    if (this.closing) return;
    this.hygiene = startHygiene(options, plan.streams, commands, this.logger, this.events.consumersDeleted);
  }

  /** See `RedisStreamsServer.health`. */
  async health(options: { maxStatsAgeMs?: number; stats?: boolean } = {}): Promise<RedisStreamsHealth> {
    if (this.probe) return this.probe.snapshot(options);
    const state = this.closing ? 'stopped' : 'starting';
    return { state, group: this.options.group, consumer: this.options.consumer, redisDownForMs: 0, streams: [], statsAgeMs: undefined };
  }

  /** `[command, blocking…]` connections; undefined before `start`. */
  connections(): [Redis | Cluster, ...Redis[]] | undefined {
    if (!this.command) return undefined;
    return [this.command.conn, ...this.readers.flatMap((r) => r.lanes.blockingConnection() ?? [])];
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
    // `start` must answer: an app closed while still starting gets an error, not silence.
    this.gate?.fail(new Error(CLOSED_BEFORE_START));
    if (this.readers.length === 0) {
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
    if (this.gate?.isOpen)
      logStopping(
        this.logger,
        this.options,
        this.readers.flatMap((r) => r.loop.running()),
      );
    // Every lane woken at once: stopping takes as long as the slowest, not their sum.
    await Promise.all([...this.readers.map((r) => r.loop.stop()), this.hygiene?.stop()]);
    // The host's interrupt (a second signal, an abort) while handlers run ends the wait; what is in hand stays pending.
    const inHand = this.gate?.isOpen === true && this.readers.some((r) => r.loop.inHand().length > 0);
    await untilInterrupted(inHand, this.interrupt, async (interrupted) => {
      if (this.gate?.isOpen) await Promise.all(this.readers.map((r) => settleInHand(r, shutdownTimeoutMs, interrupted, this.logger)));
      else await this.cutStart();
      this.telemetry?.dispose();
      await this.closeConnections();
      this.watch.closed();
      this.logger.log(`consumer "${consumer}" stopped`);
    });
  }

  /** Not started: nothing is in hand, and the start's commands still queued on an unready Redis (up to commandTimeoutMs) are cut. */
  private async cutStart(): Promise<void> {
    await this.closeConnections();
    for (const reader of this.readers) reader.run.unsubscribe();
  }

  private async closeConnections(): Promise<void> {
    await Promise.all(this.readers.map((r) => r.lanes.close()));
    if (this.command) await closeCommandLane(this.command);
  }
}
