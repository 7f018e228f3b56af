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

  /** Liveness: down once the consumer is stopped or cut off from Redis longer than HEALTH_REDIS_DOWN_MS. */
  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.streams.isLive(HEALTH_KEY, this.server, { redisDownMs: this.thresholds.redisDownMs })]);
  }

  /** Readiness: also down while starting, and while a stream's lag or pending count is above HEALTH_MAX_LAG / HEALTH_MAX_PENDING. */
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
