import { Controller, Get, Inject, Module } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { RedisStreamsDashboardModule, RedisStreamsServer, StreamPattern, type RedisStreamsContext } from 'nestjs-redis-streams';
import { RedisStreamsHealthIndicator } from 'nestjs-redis-streams/terminus';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

// docs/guide/wiring.md's one way to share one RedisStreamsServer: a provider made at bootstrap from injected settings,
// given to connectMicroservice by app.get(), injected into the Terminus controller and the dashboard's registerAsync,
// and in tests the same module with the settings overridden. One instance everywhere: the handler, /health/ready and
// the dashboard's consumer panel are the same consumer, and app.close() stops it.

const redis = useRedis();

const SETTINGS = Symbol('settings');
interface Settings {
  redisUrl: string;
  keyPrefix: string;
}

@Module({ providers: [{ provide: SETTINGS, useValue: { redisUrl: 'redis://127.0.0.1:1', keyPrefix: 'app:' } }], exports: [SETTINGS] })
class SettingsModule {}

@Module({
  imports: [SettingsModule],
  providers: [
    {
      provide: RedisStreamsServer,
      inject: [SETTINGS],
      useFactory: (s: Settings) =>
        new RedisStreamsServer({ connection: s.redisUrl, keyPrefix: s.keyPrefix, group: 'orders-workers', blockMs: 100 }),
    },
  ],
  exports: [RedisStreamsServer],
})
class StreamsModule {}

const handled: string[] = [];

@Controller()
class OrdersController {
  @StreamPattern('orders')
  placed(@Payload() order: { id: string }, @Ctx() ctx: RedisStreamsContext) {
    handled.push(`${order.id} ${ctx.getConsumer()}`);
  }
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly streams: RedisStreamsHealthIndicator,
    @Inject(RedisStreamsServer) private readonly server: RedisStreamsServer,
  ) {}

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.streams.isReady('worker', this.server)]);
  }
}

@Module({
  imports: [
    StreamsModule,
    TerminusModule,
    RedisStreamsDashboardModule.registerAsync({
      imports: [StreamsModule, SettingsModule],
      inject: [RedisStreamsServer, SETTINGS],
      useFactory: (server: RedisStreamsServer, s: Settings) => ({
        basePath: '/ops/streams',
        connection: s.redisUrl,
        server,
        minIdleMs: server.options.minIdleMs,
      }),
    }),
  ],
  controllers: [OrdersController, HealthController],
  providers: [RedisStreamsHealthIndicator],
})
class AppModule {}

describe('one server shared by the microservice, Terminus, the dashboard and a test (docs/guide/wiring.md)', () => {
  it('the handler, /health/ready and the dashboard see the one consumer; close() stops it', async () => {
    const keyPrefix = uniquePrefix();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(SETTINGS)
      .useValue({ redisUrl: redis.url, keyPrefix })
      .compile();
    const app = moduleRef.createNestApplication({ logger: false });
    const server = app.get(RedisStreamsServer);
    app.connectMicroservice({ strategy: server }, { inheritAppConfig: true });
    try {
      await app.startAllMicroservices();
      await app.listen(0, '127.0.0.1');
      const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
      await redis.client().xadd(`${keyPrefix}orders`, '*', 'data', JSON.stringify({ id: 'o-1' }));
      await waitFor(() => handled.length === 1, { message: 'the order handled' });
      expect(handled[0]).toBe(`o-1 ${server.options.consumer}`);
      const ready = await fetch(`${base}/health/ready`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { info: { worker: { status: string } } }).info.worker.status).toBe('up');
      const { health } = (await (await fetch(`${base}/ops/streams/api/consumer`)).json()) as {
        health: { consumer: string; state: string };
      };
      expect([health.consumer, health.state]).toEqual([server.options.consumer, 'running']);
    } finally {
      await app.close();
    }
    expect((await server.health()).state).toBe('stopped');
  });
});
