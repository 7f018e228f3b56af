import 'reflect-metadata';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Transport, type MicroserviceOptions } from '@nestjs/microservices';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisStreamsServer, StreamPattern } from 'nestjs-redis-streams';

/** What every system under test hands the handler: the producer's timestamp, for latency. */
export type Handler = (message: { t?: string | number }) => unknown;

export interface ConsumerOptions {
  url: string;
  /** Stream key, BullMQ queue name or pub/sub channel. */
  key: string;
  group: string;
  consumer: string;
  batchSize: number;
  concurrency: number;
  blockMs?: number;
  minIdleMs?: number;
  /** nestjs-redis-streams on a Redis Cluster: its node URLs (then `url` is unused). */
  cluster?: string[];
  /** nestjs-redis-streams: read `key` as a partitioned stream, `@StreamPattern(key, { partitions })`. */
  partitions?: number;
  /** nestjs-redis-streams: its `telemetry` option (default true). */
  telemetry?: boolean;
}

export interface RunningConsumer {
  stop(): Promise<void>;
}

export type SystemName = 'raw-ioredis' | 'nestjs-redis-streams' | 'bullmq' | 'nest-redis-pubsub';

/** `beforeListen` (Nest systems): awaited once the app is built, before it connects and starts reading. */
export async function startConsumer(system: SystemName, o: ConsumerOptions, handler: Handler, beforeListen?: () => Promise<unknown>): Promise<RunningConsumer> {
  switch (system) {
    case 'raw-ioredis':
      return rawLoop(o, handler);
    case 'nestjs-redis-streams':
      return nestApp(
        {
          strategy: new RedisStreamsServer({
            connection: o.cluster ?? o.url,
            group: o.group,
            consumer: o.consumer,
            batchSize: o.batchSize,
            concurrency: o.concurrency,
            blockMs: o.blockMs ?? 1000,
            minIdleMs: o.minIdleMs ?? 30_000,
            ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
          }),
        },
        StreamPattern(o.key, o.partitions === undefined ? undefined : { partitions: o.partitions }),
        handler,
        beforeListen,
      );
    case 'nest-redis-pubsub': {
      const { hostname, port } = new URL(o.url);
      return nestApp({ transport: Transport.REDIS, options: { host: hostname, port: Number(port) } }, EventPattern<string>(o.key), handler, beforeListen);
    }
    case 'bullmq': {
      const worker = new Worker(o.key, async (job) => handler(job.data), {
        connection: { url: o.url, maxRetriesPerRequest: null },
        concurrency: o.concurrency,
        removeOnComplete: { count: 0 },
      });
      await worker.waitUntilReady();
      return { stop: () => worker.close() };
    }
  }
}

/** The reference: the least a Redis Streams consumer can do (XREADGROUP COUNT n, one pipelined XACK per batch). */
async function rawLoop(o: ConsumerOptions, handler: Handler): Promise<RunningConsumer> {
  const redis = new Redis(o.url);
  await redis.xgroup('CREATE', o.key, o.group, '0', 'MKSTREAM').catch(() => {});
  let running = true;
  const done = (async () => {
    while (running) {
      const reply = (await redis.xreadgroup('GROUP', o.group, o.consumer, 'COUNT', o.batchSize, 'BLOCK', o.blockMs ?? 1000, 'STREAMS', o.key, '>')) as
        | [string, [string, string[]][]][]
        | null;
      const entries = reply?.[0]?.[1] ?? [];
      if (entries.length === 0) continue;
      for (const [, fields] of entries) await handler({ t: fields[fields.indexOf('t') + 1] });
      await redis.xack(o.key, o.group, ...entries.map(([id]) => id));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      redis.disconnect();
    },
  };
}

/** A Nest microservice whose one controller method, decorated at run time, calls `handler`. */
async function nestApp(options: MicroserviceOptions, decorator: MethodDecorator, handler: Handler, beforeListen?: () => Promise<unknown>): Promise<RunningConsumer> {
  class BenchController {
    handle(message: { t?: string | number }) {
      return handler(message);
    }
  }
  decorator(BenchController.prototype, 'handle', Object.getOwnPropertyDescriptor(BenchController.prototype, 'handle')!);
  Controller()(BenchController);
  class BenchModule {}
  Module({ controllers: [BenchController] })(BenchModule);
  const app: INestMicroservice = await NestFactory.createMicroservice<MicroserviceOptions>(BenchModule, { ...options, logger: false });
  if (beforeListen) {
    await app.init();
    await beforeListen();
  }
  await app.listen();
  return { stop: () => app.close() };
}
