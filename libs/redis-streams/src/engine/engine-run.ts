import type { Cluster, Redis } from 'ioredis';
import type { ConsumerHygiene } from '../consumer/upkeep/consumer-hygiene.js';
import type { RateLimitNotice } from '../consumer/upkeep/rate-limit-notice.js';
import type { Running } from '../consumer/watch/stuck-watch.js';
import type { HealthProbe } from '../health/health-probe.js';
import type { Logger } from '../ports.js';
import { closeCommandLane, type CommandLane } from '../redis/connection/command-lane.js';
import type { ConsumerTelemetry } from '../telemetry/consumer-telemetry.js';
import type { Reader } from '../consumer/reader.js';
import { settleInHand } from './shutdown.js';
import type { StartupGate } from './startup-gate.js';

/**
 * A start of the engine: its command lane, startup gate, readers, health probe and telemetry, and
 * how they stop. `consumerCleanup`'s hygiene joins once the start succeeded.
 */
export class EngineRun {
  /** Started only once every reader has its groups (undefined before, and when `consumerCleanup` is off). */
  private hygiene: ConsumerHygiene | undefined;
  /** The rate limits written for the dashboard (undefined before the start, and when no pattern has one). */
  private notice: RateLimitNotice | undefined;

  constructor(
    /** The command connection (on a cluster, one ioredis Cluster) every reader shares. */
    readonly command: CommandLane,
    readonly gate: StartupGate,
    readonly readers: readonly Reader[],
    readonly probe: HealthProbe,
    /** Undefined: telemetry off, no `@opentelemetry/api`, or a broken SDK. */
    readonly telemetry: ConsumerTelemetry | undefined,
    /** The durable acks' own connection, when an ordered pattern has them. */
    readonly durable?: CommandLane | undefined,
  ) {}

  /** The start succeeded: its hygiene and rate-limit notice (if any), stopped with the loops. */
  started(hygiene: ConsumerHygiene | undefined, notice?: RateLimitNotice): void {
    this.hygiene = hygiene;
    this.notice = notice;
  }

  /** `[command, blocking…]` connections. */
  connections(): [Redis | Cluster, ...Redis[]] {
    return [
      this.command.conn,
      ...this.readers.flatMap((r) => r.lanes.blockingConnection() ?? []),
      ...(this.durable && !('isCluster' in this.durable.conn && this.durable.conn.isCluster) ? [this.durable.conn as Redis] : []),
    ];
  }

  /** The entries whose handler runs, every reader's. */
  running(): Running[] {
    return this.readers.flatMap((r) => r.running());
  }

  /** Every loop (and the hygiene) told to stop taking work; resolves when they have. */
  async stop(): Promise<void> {
    // Every lane woken at once: stopping takes as long as the slowest, not their sum.
    await Promise.all([...this.readers.map((r) => r.stop()), this.hygiene?.stop(), this.notice?.stop()]);
  }

  /** Every reader looks at the pause flags now (after this process paused or resumed a pattern). */
  async lookAtPauses(): Promise<void> {
    await Promise.all(this.readers.map((r) => r.lookAtPauses()));
  }

  /** Entries fetched and not settled yet, in some reader. */
  holdsEntries(): boolean {
    return this.readers.some((r) => r.inHand().length > 0);
  }

  /**
   * Ends the run once its loops have stopped: a started one lets the entries in hand settle (see
   * settleInHand); a start cut short has nothing in hand, and its commands still queued on an
   * unready Redis (up to commandTimeoutMs) are cut. Then the telemetry ends and every connection closes.
   */
  async end(limitMs: number | undefined, interrupted: Promise<string>, logger: Logger): Promise<void> {
    if (this.gate.isOpen) await Promise.all(this.readers.map((r) => settleInHand(r, limitMs, interrupted, logger)));
    else await this.cutStart();
    this.telemetry?.dispose();
    await this.closeConnections();
  }

  private async cutStart(): Promise<void> {
    await this.closeConnections();
    for (const reader of this.readers) reader.cut();
  }

  private async closeConnections(): Promise<void> {
    await Promise.all(this.readers.map((r) => r.lanes.close()));
    await Promise.all([closeCommandLane(this.command), this.durable && closeCommandLane(this.durable)]);
  }
}
