import { Module, type DynamicModule } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import type { HealthThresholds } from 'nestjs-redis-streams';
import { RedisStreamsHealthIndicator, type HealthSource } from 'nestjs-redis-streams/terminus';
import { HealthController, MetricsController } from './health.controller.js';
import { HEALTH_THRESHOLDS, METRICS_EXPORTER, STREAMS_SERVER } from './tokens.js';

/** The worker's HTTP side (only with HEALTH_PORT): health checks of the transport, and its metrics. */
@Module({})
export class HealthModule {
  static register(server: HealthSource, thresholds: HealthThresholds, exporter: PrometheusExporter): DynamicModule {
    return {
      module: HealthModule,
      imports: [TerminusModule.forRoot()],
      controllers: [HealthController, MetricsController],
      providers: [
        RedisStreamsHealthIndicator,
        { provide: STREAMS_SERVER, useValue: server },
        { provide: HEALTH_THRESHOLDS, useValue: thresholds },
        { provide: METRICS_EXPORTER, useValue: exporter },
      ],
    };
  }
}
