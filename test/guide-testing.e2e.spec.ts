// test/guide-testing.e2e.spec.ts
// A worker and a producer under @nestjs/testing, against a throwaway redis-server.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { Controller, Injectable, Module, type INestMicroservice } from '@nestjs/common';
import { ClientsModule, Ctx, Payload, type ClientProxy, type MicroserviceOptions } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { RedisStreamsClient, RedisStreamsContext, RedisStreamsRecord, RedisStreamsServer, StreamPattern } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// ---- The app under test (in an app: src/). ----

interface Order {
  order_id: string;
  status: string;
}

/** Stands in for ConfigService: read at compile(), not at import. */
export class RedisSettings {
  constructor(readonly url: string) {}
}

@Module({
  providers: [{ provide: RedisSettings, useFactory: () => new RedisSettings(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') }],
  exports: [RedisSettings],
})
export class SettingsModule {}

/** What the handler saw: the test polls it. */
@Injectable()
export class OrdersSeen {
  readonly orders: { id: string; order: Order; headers: Record<string, string> }[] = [];
}

@Controller()
export class OrdersController {
  constructor(private readonly seen: OrdersSeen) {}

  @StreamPattern('orders')
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext): void {
    this.seen.orders.push({ id: ctx.getId(), order, headers: ctx.getHeaders() });
  }
}

@Module({
  imports: [
    SettingsModule,
    ClientsModule.registerAsync([
      {
        name: 'ORDERS',
        imports: [SettingsModule],
        inject: [RedisSettings],
        useFactory: (settings: RedisSettings) => ({ customClass: RedisStreamsClient, options: { connection: settings.url } }),
      },
    ]),
  ],
  controllers: [OrdersController],
  providers: [OrdersSeen],
})
export class AppModule {}

// ---- Test helpers. ----

/** Polls `condition` until it is truthy; fails after `timeoutMs`, naming what it waited for. */
async function waitFor<T>(condition: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20)); // poll interval
  }
}

/** A free loopback port, picked by the OS. */
async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** redis-server on a free loopback port, no persistence; resolves once it accepts connections. */
async function startRedisServer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const flags = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const proc = spawn(process.env.REDIS_SERVER_BIN ?? 'redis-server', flags, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(proc, 'exit'); // rejects if the binary cannot be run
  let log = '';
  proc.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill();
    await exited.catch(() => {});
  };
  try {
    await Promise.race([
      waitFor(() => log.includes('Ready to accept connections'), `redis-server on port ${port}`),
      exited.then(() => Promise.reject(new Error(`redis-server exited during start-up:\n${log}`))),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `redis://127.0.0.1:${port}`, stop };
}

// ---- The test. ----

describe('the orders worker and its producer', () => {
  let redis: Awaited<ReturnType<typeof startRedisServer>> | undefined;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(RedisSettings)
      .useValue(new RedisSettings(redis.url))
      .compile();
    app = moduleRef.createNestMicroservice<MicroserviceOptions>({
      strategy: new RedisStreamsServer({ connection: redis.url, group: 'orders-workers', consumer: 'test-1' }),
      logger: ['error', 'warn'],
    });
    await app.listen(); // the group exists once listen() resolves
  });

  afterAll(async () => {
    await app?.close(); // stops the worker, closes the ORDERS client
    await redis?.stop();
  });

  it('hands an order emitted through the client to the @StreamPattern handler', async () => {
    const orders = app!.get<ClientProxy>('ORDERS');
    const record = new RedisStreamsRecord({ order_id: '1001', status: 'paid' }, { traceId: 't-1001' });
    const id = await lastValueFrom(orders.emit<string>('orders', record)); // resolves once Redis has the entry

    const seen = await waitFor(() => app!.get(OrdersSeen).orders.find((o) => o.id === id), `entry ${id} to be handled`);
    expect(seen).toEqual({ id, order: { order_id: '1001', status: 'paid' }, headers: { traceId: 't-1001' } });
  });
});
