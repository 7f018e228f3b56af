import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { checkLiveness, checkReadiness, type HealthThresholds, type HealthVerdict, type RedisStreamsHealth } from '../health/health.js';

/** What the indicator reads: a `RedisStreamsServer` (typed by shape, so the ESM and CommonJS builds both fit). */
export interface HealthSource {
  health(options?: { maxStatsAgeMs?: number; stats?: boolean }): Promise<RedisStreamsHealth>;
}

/**
 * Terminus health indicator of a `RedisStreamsServer` (Terminus 11/12, `HealthIndicatorService`).
 *
 *   @Get('live') @HealthCheck() live() { return this.health.check([() => this.streams.isLive('orders-worker', server)]); }
 *   @Get('ready') @HealthCheck() ready() { return this.health.check([() => this.streams.isReady('orders-worker', server)]); }
 *
 * The result carries the figures either way: per stream lag, pending, entries in hand and last beat age.
 */
@Injectable()
export class RedisStreamsHealthIndicator {
  constructor(private readonly indicators: HealthIndicatorService) {}

  /**
   * Down once the consumer is stopped, or a loop is stuck in one entry for longer than `stuckLoopMs`
   * (default 5 min): what a restart cures. A Redis outage only with `redisDownMs` given: restarting
   * every pod cures none, so by default it makes them unready instead (`isReady`).
   */
  async isLive(
    key: string,
    server: HealthSource,
    thresholds: Pick<HealthThresholds, 'redisDownMs' | 'stuckLoopMs'> = {},
  ): Promise<HealthIndicatorResult> {
    // Lag and pending do not decide liveness: not waited for (a probe's timeout is short).
    const health = await server.health({ stats: false });
    return this.result(key, health, checkLiveness(health, thresholds));
  }

  /**
   * Also down while starting, while Redis has been unreachable for longer than `redisDownMs` (default
   * 30 s) or refuses the consumer's calls, and, only when set, while any stream's lag or pending count
   * is above `maxLag` / `maxPending` (a backlog is the group's, not the pod's: as a Kubernetes readiness
   * condition it would hold a rolling deploy exactly when a backlog appears; alert on the lag metric).
   */
  async isReady(key: string, server: HealthSource, thresholds: HealthThresholds = {}): Promise<HealthIndicatorResult> {
    const health = await server.health();
    return this.result(key, health, checkReadiness(health, thresholds));
  }

  private result(key: string, health: RedisStreamsHealth, verdict: HealthVerdict): HealthIndicatorResult {
    const check = this.indicators.check(key);
    const data = { ...health, ...(verdict.up ? {} : { reasons: verdict.reasons }) };
    return verdict.up ? check.up(data) : check.down(data);
  }
}
