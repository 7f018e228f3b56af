import 'reflect-metadata';
import { Logger, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { MicroserviceOptions } from '@nestjs/microservices';
import { RedisStreamsDashboardModule, RedisStreamsServer } from 'nestjs-redis-streams';
import { healthBaseUrl, healthConfig, type HealthConfig } from './health-config.js';
import { OrdersWorkerModule } from './orders-worker.module.js';
import { workerConfig } from './worker-config.js';

async function bootstrap(): Promise<void> {
  const { transport, connection, demo, ordersPartitions, ordersBatch, ordersOrdered } = workerConfig();
  const health = healthConfig();
  const orders = OrdersWorkerModule.register(demo, connection, ordersPartitions, ordersBatch, ordersOrdered);
  if (health) return hybrid(orders, new RedisStreamsServer(transport), health, connection);
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(orders, {
    strategy: new RedisStreamsServer(transport),
  });
  // SIGTERM/SIGINT: finish and ack the entry in hand, close Redis, exit 0.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  await app.listen();
}

/**
 * With HEALTH_PORT: the same worker as a hybrid app, the transport connected to a small HTTP
 * app that answers `/health/live`, `/health/ready` and `/metrics` (Prometheus text).
 */
async function hybrid(
  orders: DynamicModule,
  server: RedisStreamsServer,
  health: HealthConfig,
  connection: string | string[],
): Promise<void> {
  // Loaded only here: a worker without HEALTH_PORT never loads Express, Terminus or the OpenTelemetry SDK.
  const [{ metrics }, { MeterProvider }, { PrometheusExporter }, { HealthModule }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-metrics'),
    import('@opentelemetry/exporter-prometheus'),
    import('./health.module.js'),
  ]);
  // Registered before the transport starts: it reports its metrics to the global MeterProvider it finds then.
  // `/metrics` collects on request; the exporter opens no port of its own.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }));

  // The dashboard, read-only, on the worker's own Redis, with this worker's own health: /dashboard/.
  const dashboard = RedisStreamsDashboardModule.register({
    basePath: '/dashboard',
    connection,
    minIdleMs: server.options.minIdleMs,
    server,
  });
  @Module({ imports: [orders, HealthModule.register(server, health.thresholds, exporter), dashboard] })
  class OrdersWorkerHttpModule {}

  // forceCloseConnections: a probe's half-sent request (or an idle keep-alive) must not hold the
  // shutdown, during which the consumer, closed after the HTTP side, would keep taking orders.
  const app = await NestFactory.create(OrdersWorkerHttpModule, { forceCloseConnections: true });
  app.connectMicroservice<MicroserviceOptions>({ strategy: server }, { inheritAppConfig: true });
  // SIGTERM/SIGINT: stop answering HTTP, finish and ack the entry in hand, close Redis, exit 0.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  // HTTP first: while the consumer starts (on a cluster, every slot's group must exist first),
  // /health/live already answers and /health/ready says "starting" (503), rather than no answer.
  await app.listen(health.port, health.host);
  const base = healthBaseUrl(health);
  Logger.log(`health ${base}/health/live ${base}/health/ready, metrics ${base}/metrics, dashboard ${base}/dashboard/`, 'orders-worker');
  await app.startAllMicroservices();
}

bootstrap().catch((err: unknown) => {
  // SIGTERM while still starting (on a cluster, every slot's group must exist first): nothing was
  // in hand, so the stop is as orderly as one after the start.
  if (err instanceof Error && /closed before it started/.test(err.message)) {
    console.log('stopped before the consumer started');
    process.exit(0);
  }
  console.error(err);
  process.exit(1);
});
