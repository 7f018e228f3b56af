import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { clientOptions } from './api-config.js';
import { OrdersApiModule } from './orders-api.module.js';
import { OrdersProducer } from './orders-producer.js';

/** Demo producer: emits DEMO_ORDERS orders through RedisStreamsClient, then asks the worker for its tally. */
async function main(): Promise<void> {
  const int = (name: string, fallback: number): number => {
    const value = Number(process.env[name] ?? fallback);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a whole number, got ${process.env[name]}`);
    return value;
  };
  const app = await NestFactory.createApplicationContext(OrdersApiModule.register(clientOptions()));
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  const producer = app.get(OrdersProducer);
  await producer.emitOrders(int('DEMO_ORDERS', 300), int('DEMO_FIRST_ORDER_ID', 1001));
  const stats = await producer.workerStats(int('DEMO_STATS_TIMEOUT_MS', 10_000)).catch((err: unknown) => {
    Logger.warn(`no answer to orders-stats: ${err instanceof Error ? err.message : JSON.stringify(err)}`, 'orders-api');
    return undefined;
  });
  if (stats) Logger.log(`worker ${stats.consumer} reports ${stats.handled} orders handled so far`, 'orders-api');
  await app.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
