import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { MicroserviceOptions } from '@nestjs/microservices';
import { RedisStreamsServer } from 'nestjs-redis-streams';
import { OrdersWorkerModule } from './orders-worker.module.js';
import { workerConfig } from './worker-config.js';

async function bootstrap(): Promise<void> {
  const { transport, connection, demo, ordersPartitions } = workerConfig();
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(OrdersWorkerModule.register(demo, connection, ordersPartitions), {
    strategy: new RedisStreamsServer(transport),
  });
  // SIGTERM/SIGINT: finish and ack the entry in hand, close Redis, exit 0.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  await app.listen();
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
