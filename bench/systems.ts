import 'reflect-metadata';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Transport, type MicroserviceOptions } from '@nestjs/microservices';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisStreamsServer, StreamPattern, type RedisStreamsServerOptions } from 'nestjs-redis-streams';
import { StreamConsumer } from 'nestjs-redis-streams/core';

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
  /** nestjs-redis-streams: its `readAhead` option (default true). */
  readAhead?: boolean;
}

export interface RunningConsumer {
  stop(): Promise<void>;
}

export type SystemName =
  | 'expert-pipelined'
  | 'expert-readahead'
  | 'naive-ioredis'
  | 'nestjs-redis-streams'
  | 'nestjs-redis-streams-batch'
  | 'stream-consumer'
  | 'stream-consumer-batch'
  | 'bullmq'
  | 'nest-redis-pubsub';

/** The hand-written ioredis loops: the references (expert-*) and the old, handicapped one (naive). */
export const EXPERT_LOOPS = ['expert-pipelined', 'expert-readahead'] as const;
export type ExpertLoop = (typeof EXPERT_LOOPS)[number];

/** Systems that read a Redis stream through a consumer group (the others: a BullMQ queue, a pub/sub channel). */
export const readsStream = (system: SystemName): boolean => system !== 'bullmq' && system !== 'nest-redis-pubsub';

/** `beforeListen` (Nest systems): awaited once the app is built, before it connects and starts reading. */
export async function startConsumer(
  system: SystemName,
  o: ConsumerOptions,
  handler: Handler,
  beforeListen?: () => Promise<unknown>,
): Promise<RunningConsumer> {
  switch (system) {
    case 'expert-pipelined':
      return expertPipelined(o, handler);
    case 'expert-readahead':
      return expertReadahead(o, handler);
    case 'naive-ioredis':
      return naiveLoop(o, handler);
    case 'nestjs-redis-streams':
      return nestApp(
        { strategy: streamsServer(o, { batchSize: o.batchSize, ...(o.readAhead === undefined ? {} : { readAhead: o.readAhead }) }) },
        StreamPattern(o.key, o.partitions === undefined ? undefined : { partitions: o.partitions }),
        handler,
        beforeListen,
      );
    case 'nestjs-redis-streams-batch':
      // A batch handler of `batchSize` entries per call: one Nest dispatch and one ack per batch.
      return nestApp(
        { strategy: streamsServer(o) },
        StreamPattern(o.key, { batch: { maxSize: o.batchSize } }),
        async (entries: unknown) => {
          for (const entry of entries as { payload: { t?: string | number } }[]) await handler(entry.payload);
        },
        beforeListen,
      );
    case 'stream-consumer': {
      // The plain-Node host (nestjs-redis-streams/core): the same engine without Nest's dispatch.
      const consumer = new StreamConsumer({ ...engineOptions(o), batchSize: o.batchSize, logger: false }).handle(o.key, (payload) =>
        handler(payload as { t?: string | number }),
      );
      await beforeListen?.();
      await consumer.start();
      return { stop: () => consumer.close() };
    }
    case 'stream-consumer-batch': {
      // The plain-Node host with a batch handler of `batchSize` entries per call, as the Nest batch row.
      const consumer = new StreamConsumer({ ...engineOptions(o), logger: false }).handle(
        o.key,
        async (entries) => {
          for (const entry of entries) await handler(entry.payload as { t?: string | number });
        },
        { batch: { maxSize: o.batchSize } },
      );
      await beforeListen?.();
      await consumer.start();
      return { stop: () => consumer.close() };
    }
    case 'nest-redis-pubsub': {
      const { hostname, port } = new URL(o.url);
      return nestApp(
        { transport: Transport.REDIS, options: { host: hostname, port: Number(port) } },
        EventPattern<string>(o.key),
        handler,
        beforeListen,
      );
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

/** The bench's options as either host takes them. */
const engineOptions = (o: ConsumerOptions) => ({
  connection: o.cluster ?? o.url,
  group: o.group,
  consumer: o.consumer,
  concurrency: o.concurrency,
  blockMs: o.blockMs ?? 1000,
  minIdleMs: o.minIdleMs ?? 30_000,
  ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
});

/** This transport's server with the bench's options, plus `extra`. */
function streamsServer(o: ConsumerOptions, extra: RedisStreamsServerOptions = {}): RedisStreamsServer {
  return new RedisStreamsServer({ ...engineOptions(o), ...extra });
}

type ReadReply = [string, [string, string[]][]][] | null;
const entriesOf = (reply: ReadReply) => reply?.[0]?.[1] ?? [];
const readArgs = (o: ConsumerOptions) =>
  ['GROUP', o.group, o.consumer, 'COUNT', o.batchSize, 'BLOCK', o.blockMs ?? 1000, 'STREAMS', o.key, '>'] as const;
/** Each entry's handler awaited in turn, as every system under test does at concurrency 1. */
async function handleAll(entries: [string, string[]][], handler: Handler): Promise<void> {
  for (const [, fields] of entries) await handler({ t: fields[fields.indexOf('t') + 1] });
}

/**
 * Reference 1, what a Redis expert writes first: XREADGROUP COUNT n BLOCK; handle the batch; then
 * the batch's XACK and the next XREADGROUP in ONE pipeline: one round trip per batch (Redis runs the
 * ack, then the read). On stop, the last batch is acked alone.
 */
async function expertPipelined(o: ConsumerOptions, handler: Handler): Promise<RunningConsumer> {
  const redis = new Redis(o.url);
  await redis.xgroup('CREATE', o.key, o.group, '0', 'MKSTREAM').catch(() => {});
  let running = true;
  const done = (async () => {
    let reply = (await redis.xreadgroup(...readArgs(o))) as ReadReply;
    for (;;) {
      const entries = entriesOf(reply);
      await handleAll(entries, handler);
      const ids = entries.map(([id]) => id);
      if (!running) {
        if (ids.length > 0) await redis.xack(o.key, o.group, ...ids);
        return;
      }
      if (ids.length === 0) {
        reply = (await redis.xreadgroup(...readArgs(o))) as ReadReply;
        continue;
      }
      const [ack, read] = (await redis
        .pipeline()
        .xack(o.key, o.group, ...ids)
        .xreadgroup(...readArgs(o))
        .exec())!;
      if (ack![0]) throw ack![0];
      if (read![0]) throw read![0];
      reply = read![1] as ReadReply;
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

/**
 * Reference 2, the read kept in flight: as soon as batch N arrives the read of batch N+1 is sent,
 * so Redis serves it while batch N is handled. A blocked XREADGROUP holds its connection (an XACK
 * sent behind it would wait for it), so two connections take turns: read N+1 goes out on the other
 * connection, and N's XACK on N's own connection, now free, sent without waiting for its answer
 * (that connection's next read goes out behind it). One read is out at any time, so every entry is
 * delivered once and handled in stream order; a failed ack stops the loop; on stop the read in
 * flight is waited for and its entries handled and acked too.
 */
async function expertReadahead(o: ConsumerOptions, handler: Handler): Promise<RunningConsumer> {
  const conns = [new Redis(o.url), new Redis(o.url)] as const;
  await conns[0].xgroup('CREATE', o.key, o.group, '0', 'MKSTREAM').catch(() => {});
  let running = true;
  const read = (conn: Redis) => conn.xreadgroup(...readArgs(o)) as Promise<ReadReply>;
  const done = (async () => {
    const acks = new Set<Promise<unknown>>();
    let failed: unknown;
    let turn = 0;
    let next: Promise<ReadReply> | undefined = read(conns[0]);
    while (next) {
      if (failed) throw failed;
      const entries = entriesOf(await next);
      const mine = conns[turn]!;
      turn ^= 1;
      next = running ? read(conns[turn]!) : undefined;
      await handleAll(entries, handler);
      if (entries.length === 0) continue;
      const ack: Promise<unknown> = mine.xack(o.key, o.group, ...entries.map(([id]) => id)).then(
        () => acks.delete(ack),
        (err: unknown) => (failed ??= err),
      );
      acks.add(ack);
    }
    await Promise.all(acks);
    if (failed) throw failed;
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      for (const conn of conns) conn.disconnect();
    },
  };
}

/**
 * The previous yardstick, kept as a labelled row: it awaits each batch's XACK before sending the
 * next read (two round trips per batch, one of them idle), a handicap the transport does not have.
 */
async function naiveLoop(o: ConsumerOptions, handler: Handler): Promise<RunningConsumer> {
  const redis = new Redis(o.url);
  await redis.xgroup('CREATE', o.key, o.group, '0', 'MKSTREAM').catch(() => {});
  let running = true;
  const done = (async () => {
    while (running) {
      const entries = entriesOf((await redis.xreadgroup(...readArgs(o))) as ReadReply);
      if (entries.length === 0) continue;
      await handleAll(entries, handler);
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
async function nestApp(
  options: MicroserviceOptions,
  decorator: MethodDecorator,
  handler: (message: never) => unknown,
  beforeListen?: () => Promise<unknown>,
): Promise<RunningConsumer> {
  class BenchController {
    handle(message: never) {
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
