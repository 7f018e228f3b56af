import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { IncomingMessage, ServerResponse } from 'node:http';
import type { HealthThresholds } from 'nestjs-redis-streams';
import { RedisStreamsHealthIndicator, type HealthSource } from 'nestjs-redis-streams/terminus';
import { HEALTH_THRESHOLDS, METRICS_EXPORTER, STREAMS_SERVER } from './tokens.js';

/** The key of the transport's figures in the Terminus answer (`info`/`error`/`details`). */
export const HEALTH_KEY = 'orders-worker';

/**
 * `/health/live` and `/health/ready`: 200 when up, 503 when down, with the transport's figures
 * (per stream lag, pending, entries in hand, last beat) in the body either way, and when down
 * the reasons.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly streams: RedisStreamsHealthIndicator,
    @Inject(STREAMS_SERVER) private readonly server: HealthSource,
    @Inject(HEALTH_THRESHOLDS) private readonly thresholds: HealthThresholds,
  ) {}

  /**
   * Liveness, on the library's defaults (what a restart cures): down once the consumer is stopped or a
   * loop is stuck in one entry for 5 min. A Redis outage is not in it: restarting every pod cures none.
   */
  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.streams.isLive(HEALTH_KEY, this.server)]);
  }

  /**
   * Readiness: also down while starting, while Redis has been unreachable longer than HEALTH_REDIS_DOWN_MS
   * (default 30 s), and, when set, while a stream's lag or pending count is above HEALTH_MAX_LAG /
   * HEALTH_MAX_PENDING (not for a Kubernetes readiness probe: a backlog would hold a rolling deploy).
   */
  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.streams.isReady(HEALTH_KEY, this.server, this.thresholds)]);
  }
}

/** `/metrics`: the OpenTelemetry metrics (the transport's among them) in Prometheus text format. */
@Controller('metrics')
export class MetricsController {
  constructor(@Inject(METRICS_EXPORTER) private readonly exporter: PrometheusExporter) {}

  @Get()
  metrics(@Req() request: IncomingMessage, @Res() response: ServerResponse): void {
    // The exporter collects (the gauges read XINFO GROUPS then) and writes the answer itself.
    this.exporter.getMetricsRequestHandler(request, response);
  }
}
