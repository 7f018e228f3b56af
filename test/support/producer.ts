import type { LoggerService } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { ClientsModule } from '@nestjs/microservices';
import { Test, type TestingModule } from '@nestjs/testing';
import { RedisStreamsClient, RedisStreamsStatus, type RedisStreamsClientOptions } from 'nestjs-redis-streams';
import { filter, firstValueFrom, timeout } from 'rxjs';

export interface TestProducer {
  client: RedisStreamsClient;
  moduleRef: TestingModule;
  close(): Promise<void>;
}

/**
 * A producer app: the client registered the way users do, through ClientsModule with `customClass`.
 * It returns once the client's connections are up or have failed: on a busy machine a cluster
 * connection can take longer than the client's `commandTimeoutMs`, which would fail a test's first
 * emit for the machine's load, not for anything the test checks.
 */
export async function startProducer(options: RedisStreamsClientOptions, logger?: LoggerService): Promise<TestProducer> {
  const moduleRef = await Test.createTestingModule({
    imports: [ClientsModule.register([{ name: 'ORDERS', customClass: RedisStreamsClient, options }])],
  }).compile();
  moduleRef.useLogger(logger ?? (process.env.TEST_LOGS ? console : false));
  await moduleRef.init();
  const client = moduleRef.get<ClientProxy>('ORDERS') as RedisStreamsClient;
  try {
    await client.connect();
    await firstValueFrom(
      client.status.pipe(
        filter((s) => s !== RedisStreamsStatus.CONNECTING),
        timeout({ first: 60_000, with: () => Promise.reject(new Error('the test producer was still connecting after 60 s')) }),
      ),
    );
  } catch (err) {
    // Not handed to the test, so closed here: its connections would go on reconnecting in the test worker.
    await moduleRef.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return { client, moduleRef, close: () => (closing ??= moduleRef.close()) };
}

/** `startProducer` for one test file: closed after each test. */
export function useProducers(): typeof startProducer {
  const producers: TestProducer[] = [];
  afterEach(async () => {
    await Promise.all(producers.splice(0).map((p) => p.close()));
  });
  return async (options, logger) => {
    const producer = await startProducer(options, logger);
    producers.push(producer);
    return producer;
  };
}
