import { combineLatest, distinctUntilChanged, map, ReplaySubject, Subject, takeUntil, tap, type Observable } from 'rxjs';
import type { Cluster } from 'ioredis';
import { describeError } from '../describe-error.js';
import type { HealthProbe } from '../health/health-probe.js';
import { describeConnection, isCluster, secretsOf } from '../options/connection.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import { redactError } from '../redact.js';
import type { CommandLane } from '../redis/connection/command-lane.js';
import { ConnectionReport } from '../redis/connection/connection-report.js';
import { foldLaneStates, type LaneState } from '../redis/connection/lane-state.js';
import { STATUS_OF_LANES } from '../redis/connection/lane-status.js';
import { clusterNodeError, isRedirection, isRetryable, nodeCause, withNodeCause } from '../redis/replies/redis-errors.js';
import { RedisStreamsStatus } from '../status.js';
import type { EngineEvents } from './engine-events.js';
import type { ReaderReport } from '../consumer/reader.js';
import type { StartupGate } from './startup-gate.js';

/**
 * The consumer's connections watched: their states, folded, are the status (then `closing` and
 * `closed`, nothing after `closing` but `closed`) and the health probe's "Redis down"; the log tells
 * their story (ConnectionReport); and what a connection's or a loop's failure decides: what is
 * logged, whether the start under way fails, a cluster's slot map refreshed.
 */
export class ConnectionWatch {
  /** The masked URL, named in what is logged and thrown. */
  readonly where: string;
  /** What no error handed over may carry (passwords). */
  readonly secrets: string[];
  readonly onCluster: boolean;
  private readonly status = new Subject<RedisStreamsStatus>();
  /** Connection states, then `closing` and `closed`. */
  readonly status$: Observable<RedisStreamsStatus> = this.status.asObservable();
  /** Emits at `closing`: from then on the connections' states (their ends among them) are not reported. */
  private readonly ending = new ReplaySubject<void>(1);
  /** The connections' story in the log: one line per change of state. */
  private readonly report: ConnectionReport;

  constructor(
    options: Pick<ResolvedServerOptions, 'connection' | 'commandTimeoutMs'>,
    private readonly logger: Logger,
    private readonly events: EngineEvents,
    /** A start failed: the engine closes. */
    private readonly close: () => void,
  ) {
    this.onCluster = isCluster(options.connection);
    this.where = describeConnection(options.connection);
    this.secrets = secretsOf(options.connection);
    this.report = new ConnectionReport(this.where, logger, options.commandTimeoutMs);
  }

  /** Every reader's connection states, folded, as the status and the health probe's "Redis down"; until `closing`. */
  follow(lanes: readonly Observable<LaneState>[], probe: Pick<HealthProbe, 'lanesReady'>): void {
    combineLatest(lanes)
      .pipe(
        takeUntil(this.ending),
        map(foldLaneStates),
        distinctUntilChanged(),
        tap((state) => this.report.stateChanged(state)),
        map((state) => STATUS_OF_LANES[state]),
        distinctUntilChanged(),
      )
      .subscribe((s) => {
        probe.lanesReady(s === RedisStreamsStatus.CONNECTED);
        this.status.next(s);
      });
  }

  /** Fails the start under way with `error` (scrubbed by the gate), and the engine closes; nothing when it was over already. */
  failStart(gate: StartupGate, error: unknown): void {
    if (gate.fail(error)) this.close();
  }

  /** A connection's error (ioredis reports each failed attempt): while starting, one that needs a human fails the start. */
  laneFailed(failure: Error, gate: StartupGate): void {
    const err = withNodeCause(failure);
    gate.laneFailed(err);
    if (gate.pending && !isRetryable(nodeCause(failure), this.onCluster)) return this.failStart(gate, err);
    this.report.failed(err);
  }

  /** ioredis tries a connection again in `delayMs`. */
  readonly laneRetry = (_lane: string, delayMs: number | undefined): void => this.report.retrying(delayMs);

  /** A step of a loop went through: Redis answered. */
  readonly answered = (): void => this.report.answered();

  /** What the checks beside a loop (the owed-entry audit) tell of the connection: see ReaderReport.checks. */
  readonly checks: ReaderReport['checks'] = {
    failed: (error, retryInMs) =>
      this.report.notAnswering(error, retryInMs, 'checks') || this.report.covers(error, isRetryable(error, this.onCluster)),
    silent: () => this.report.silentTo('checks'),
    answered: () => this.report.answered('checks'),
  };

  /**
   * A Redis call of a loop failed; it retries after `retryInMs`. While starting, what needs a human
   * fails the start; after, it is logged (unless the report tells it, as connection trouble) and emitted, scrubbed.
   */
  loopFailed(error: unknown, retryInMs: number, gate: StartupGate, command: CommandLane): void {
    gate.loopFailed(error);
    // ioredis updates its slot map only on redirections it follows itself (none with
    // maxRedirections 0, and none seen on a blocking lane): a moved slot must not stay unknown.
    if (this.onCluster && isRedirection(error)) (command.conn as Cluster).refreshSlotsCache();
    if (gate.pending && !isRetryable(error, this.onCluster))
      return this.failStart(gate, isRedirection(error) ? clusterNodeError(error) : error);
    const retryable = isRetryable(error, this.onCluster);
    const told = this.report.notAnswering(error, retryInMs) || this.report.covers(error, retryable);
    if (!told) this.logger[retryable ? 'warn' : 'error'](`consumer loop: ${describeError(error)}; retrying in ${retryInMs} ms`);
    this.events.loopFailed(redactError(this.report.explain(error), this.where, this.secrets), retryInMs);
  }

  /** The engine is closing: after this, only `closed`. */
  closing(): void {
    this.ending.next();
    this.status.next(RedisStreamsStatus.CLOSING);
  }

  closed(): void {
    this.status.next(RedisStreamsStatus.CLOSED);
  }
}
