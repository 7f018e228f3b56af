import { Controller, Injectable, type INestMicroservice, type LoggerService } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  BatchFailure,
  DeadLetterException,
  REDIS_STREAMS_TRANSPORT,
  RedisStreamsContext,
  RedisStreamsServer,
  RetryLaterException,
  StreamPattern,
  type RedisStreamsServerOptions,
  type SettledEvent,
  type StreamBatchEntry,
} from 'nestjs-redis-streams';
import {
  BatchFailureError,
  DeadLetterError,
  RetryLaterError,
  StreamConsumer,
  type RedisStreamsEvents,
  type StreamBatchExtras,
  type StreamConsumerOptions,
  type StreamEntryContext,
  type StreamPatternExtras,
} from 'nestjs-redis-streams/core';
import { randomUUID } from 'node:crypto';
import { BatchLog, batchController } from './batch-app.js';

/**
 * Which front end `startApp` builds (one suite, two hosts): `nest` (default), a Nest microservice
 * with RedisStreamsServer; `core` (TEST_HOST=core), a plain StreamConsumer with the same Recorder
 * handlers for 'orders' and 'payments' (and the same `handlers`). A test of a Nest-only feature skips
 * itself under `core`.
 */
export const TEST_HOST: 'nest' | 'core' = process.env.TEST_HOST === 'core' ? 'core' : 'nest';
export const CORE_HOST = TEST_HOST === 'core';

/** How the host's errors name a handler's registration: `@StreamPattern('orders')`, `handle('orders')`. */
export const registered = (pattern: string): string => (CORE_HOST ? `handle('${pattern}')` : `@StreamPattern('${pattern}')`);

/** The host's own BatchFailure: Nest's `BatchFailure` (an RpcException), core's `BatchFailureError`. */
export function batchFailure(failures: Iterable<{ entry: StreamBatchEntry; error?: unknown }>, message?: string): Error {
  // Under core the entries are core's BatchEntry (a StreamContext each): what BatchFailureError takes.
  return CORE_HOST ? new BatchFailureError(failures as never, message) : new BatchFailure(failures, message);
}

/** The host's own "do not retry": Nest's `DeadLetterException`, core's `DeadLetterError`. */
export const deadLetter = (reason: string): Error => (CORE_HOST ? new DeadLetterError(reason) : new DeadLetterException(reason));

/** The host's own "retry after `ms`": Nest's `RetryLaterException`, core's `RetryLaterError`. */
export const retryLater = (ms: number): Error => (CORE_HOST ? new RetryLaterError(ms) : new RetryLaterException(ms));

/**
 * A handler `startApp` registers beside 'orders' and 'payments', with `@StreamPattern(pattern, extras)`
 * (Nest) or `handle(pattern, handler, extras)` (core): `handle` when given (the test's own function, called
 * with the payload and the host's context), else with `extras.batch` a batch handler recording into
 * `TestApp.batches`, else a single-entry one recording into `TestApp.recorder`.
 */
export interface TestHandler {
  pattern: string;
  extras?: Record<string, unknown>;
  handle?: (payload: any, ctx: any) => unknown;
}

export interface Call {
  pattern: string;
  payload: unknown;
  id: string;
  stream: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  fields: Record<string, string>;
  headers: Record<string, string>;
}

/** Records every handler call and lets a test decide what the handler does. */
@Injectable()
export class Recorder {
  readonly calls: Call[] = [];
  behavior: (call: Call) => unknown = () => undefined;

  handle(payload: unknown, ctx: StreamEntryContext): unknown {
    const call: Call = {
      pattern: ctx.getPattern(),
      payload,
      id: ctx.getId(),
      stream: ctx.getStream(),
      group: ctx.getGroup(),
      consumer: ctx.getConsumer(),
      deliveryCount: ctx.getDeliveryCount(),
      fields: ctx.getFields(),
      headers: ctx.getHeaders(),
    };
    this.calls.push(call);
    return this.behavior(call);
  }

  idsOf(pattern = 'orders'): string[] {
    return this.calls.filter((c) => c.pattern === pattern).map((c) => c.id);
  }
}

@Controller()
export class StreamsController {
  // Injected by type: undefined here means decorator metadata is missing in the test build.
  constructor(private readonly recorder: Recorder) {}

  @StreamPattern('orders')
  orders(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }

  // The bare Nest decorator works too (typed as documented in the README).
  @EventPattern<string>('payments')
  payments(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }
}

export interface TestApp {
  host: 'nest' | 'core';
  /** Nest's app and server: reading them under TEST_HOST=core throws (the test is Nest-only: skip it there). */
  app: INestMicroservice;
  server: RedisStreamsServer;
  /** The server or the StreamConsumer: both offer health, unwrap, on, options. */
  consumer: RedisStreamsServer | StreamConsumer;
  recorder: Recorder;
  /** The calls of the batch handlers among `handlers`. */
  batches: BatchLog;
  settled: SettledEvent[];
  /** Ids reported through the `deleted` event. */
  deleted: string[];
  /** Stream key of a pattern (with this app's prefix). */
  key(pattern?: string): string;
  close(): Promise<void>;
}

/** A unique key prefix, so tests sharing one Redis never see each other's streams. */
export const uniquePrefix = (): string => `t-${randomUUID().slice(0, 8)}:`;

/** A listener of a host's event. */
type Listener = [event: keyof RedisStreamsEvents, callback: (...args: any[]) => void];

/** What `startApp` adds to the app: `handlers` on both hosts; Nest's own controllers and providers (Nest only). */
export interface AppExtras {
  handlers?: TestHandler[];
  /** false: without the Recorder's 'orders' and 'payments' (StreamsController), so `handlers` may take those patterns. */
  defaults?: boolean;
  controllers?: any[];
  providers?: any[];
  /**
   * Where the host logs. Nest's logger is global (the last app's wins), so under Nest the server's own
   * lines also go to this app's logger alone: two apps of one test, each with its logger, keep theirs apart.
   */
  logger?: LoggerService;
  /** Listeners of the host's events (`[event, callback]`), registered before it starts (as `settled` and `deleted` are). */
  on?: Listener[];
  /** Called with the Nest app before it listens (Nest only): global enhancers, pre-request hooks. */
  configure?: (app: INestMicroservice) => void;
}

/** Builds a microservice from the Nest testing module with our transport (or a StreamConsumer, TEST_HOST=core), and starts it. */
export async function startApp(options: RedisStreamsServerOptions, extra: AppExtras = {}): Promise<TestApp> {
  return CORE_HOST ? startCore(options, extra) : startNest(options, extra);
}

/** A controller whose one method is `@StreamPattern(pattern, extras)` and records into Recorder. */
function recordingController(pattern: string, extras: Record<string, unknown>) {
  @Controller()
  class C {
    constructor(readonly recorder: Recorder) {}
    handle(payload: unknown, ctx: RedisStreamsContext) {
      return this.recorder.handle(payload, ctx);
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(C.prototype, 'handle')!;
  StreamPattern(pattern, extras)(C.prototype, 'handle', descriptor);
  Payload()(C.prototype, 'handle', 0);
  Ctx()(C.prototype, 'handle', 1);
  return C;
}

/** A controller whose one method is `@StreamPattern(pattern, extras)` and calls the test's `handle(payload, ctx)`. */
function handlerController(pattern: string, extras: Record<string, unknown>, handle: (payload: any, ctx: any) => unknown) {
  @Controller()
  class H {
    handle(payload: unknown, ctx: RedisStreamsContext) {
      return handle(payload, ctx);
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(H.prototype, 'handle')!;
  StreamPattern(pattern, extras)(H.prototype, 'handle', descriptor);
  Payload()(H.prototype, 'handle', 0);
  Ctx()(H.prototype, 'handle', 1);
  return H;
}

/** The listeners of `extra.on`, on the host, before it starts. */
function listen(host: RedisStreamsServer | StreamConsumer, on: Listener[] = []): void {
  for (const [event, callback] of on) (host as StreamConsumer).on(event, callback);
}

async function startNest(options: RedisStreamsServerOptions, extra: AppExtras): Promise<TestApp> {
  const handlers = (extra.handlers ?? []).map(({ pattern, extras = {}, handle }) =>
    handle
      ? handlerController(pattern, extras, handle)
      : extras.batch
        ? batchController(pattern, extras)
        : recordingController(pattern, extras),
  );
  const providers = extra.providers ?? [];
  const moduleRef = await Test.createTestingModule({
    controllers: [...(extra.defaults === false ? [] : [StreamsController]), ...handlers, ...(extra.controllers ?? [])],
    providers: [Recorder, ...(providers.includes(BatchLog) ? [] : [BatchLog]), ...providers],
  }).compile();
  const server = new RedisStreamsServer(options);
  if (extra.logger) {
    // The server's Nest Logger answers to this app's logger, whatever another app made Nest's global one.
    const logger = extra.logger;
    Object.defineProperty((server as unknown as { logger: object }).logger, 'localInstance', { get: () => logger });
  }
  const settled: SettledEvent[] = [];
  const deleted: string[] = [];
  // Registered before listen(): the first self-drain may report right away.
  server.on('settled', (e) => settled.push(e));
  server.on('deleted', (_stream, ids) => deleted.push(...ids));
  listen(server, extra.on);
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: extra.logger ?? (process.env.TEST_LOGS ? undefined : false) });
  extra.configure?.(app);
  await app.listen();
  let closing: Promise<void> | undefined;
  return {
    host: 'nest',
    app,
    server,
    consumer: server,
    recorder: app.get(Recorder),
    batches: app.get(BatchLog),
    settled,
    deleted,
    key: (pattern = 'orders') => `${options.keyPrefix ?? ''}${pattern}`,
    close: () => (closing ??= app.close()),
  };
}

/** The same Recorder handlers on a StreamConsumer: no Nest module, controller or logger context. */
async function startCore(options: RedisStreamsServerOptions, extra: AppExtras): Promise<TestApp> {
  if (extra.controllers?.length || extra.providers?.length || extra.configure)
    throw new Error('startApp: Nest controllers and providers need TEST_HOST=nest (skip this test under CORE_HOST, or use `handlers`)');
  const recorder = new Recorder();
  const batches = new BatchLog();
  const logger = extra.logger ?? (process.env.TEST_LOGS ? undefined : false);
  const consumer = new StreamConsumer({ ...options, logger });
  if (extra.defaults !== false) {
    consumer.handle('orders', (payload, ctx) => recorder.handle(payload, ctx));
    consumer.handle('payments', (payload, ctx) => recorder.handle(payload, ctx));
  }
  for (const { pattern, extras = {}, handle } of extra.handlers ?? []) {
    // Core's entries and batch context answer what BatchLog reads of Nest's (getId, getPattern, getSize…).
    if (handle) consumer.handle(pattern, handle, extras as StreamPatternExtras & { batch?: undefined });
    else if (extras.batch)
      consumer.handle(pattern, (entries, ctx) => batches.handle(entries as never, ctx as never), extras as unknown as StreamBatchExtras);
    else consumer.handle(pattern, (payload, ctx) => recorder.handle(payload, ctx), extras as StreamPatternExtras & { batch?: undefined });
  }
  const settled: SettledEvent[] = [];
  const deleted: string[] = [];
  consumer.on('settled', (e) => settled.push(e));
  consumer.on('deleted', (_stream, ids) => deleted.push(...ids));
  listen(consumer, extra.on);
  try {
    await consumer.start();
  } catch (err) {
    // As Nest's app.listen() leaves nothing running when it rejects.
    await consumer.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  const nestOnly = (what: string) => () => {
    throw new Error(`TestApp.${what} is Nest's: this test needs TEST_HOST=nest (skip it under CORE_HOST)`);
  };
  return Object.defineProperties(
    {
      host: 'core',
      consumer,
      recorder,
      batches,
      settled,
      deleted,
      key: (pattern = 'orders') => `${options.keyPrefix ?? ''}${pattern}`,
      close: () => (closing ??= consumer.close()),
    } satisfies Omit<TestApp, 'app' | 'server'> as TestApp,
    { app: { get: nestOnly('app') }, server: { get: nestOnly('server') } },
  );
}

/** `startApp` for one test file: every app it started is closed after each test. */
export function useApps(): typeof startApp {
  const apps: TestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  return async (...args) => {
    const app = await startApp(...args);
    apps.push(app);
    return app;
  };
}

/**
 * A worker on either host (TEST_HOST), built as a StreamConsumer is: `handle(pattern, handler, extras)` for
 * each pattern, then `start()`, which starts an app of those handlers alone (startApp, no Recorder handlers).
 * Its pause, resume, health, on and close are the host's: RedisStreamsServer's under Nest, StreamConsumer's
 * under core. `options.logger` is the app's logger (AppExtras.logger); listeners given to `on` before
 * `start()` are registered before the host starts.
 */
export class TestWorker {
  private readonly handlers: TestHandler[] = [];
  private readonly listeners: Listener[] = [];
  /** The started app (after `start()`). */
  app: TestApp | undefined;
  private closing: Promise<void> | undefined;

  constructor(readonly options: StreamConsumerOptions) {}

  handle(pattern: string, handle: (payload: any, ctx: any) => unknown, extras: Record<string, unknown> = {}): this {
    this.handlers.push({ pattern, extras, handle });
    return this;
  }

  on<K extends keyof RedisStreamsEvents>(event: K, callback: RedisStreamsEvents[K]): this {
    if (this.app) this.app.consumer.on(event, callback);
    else this.listeners.push([event, callback]);
    return this;
  }

  async start(): Promise<this> {
    const { logger, ...options } = this.options;
    this.app = await startApp(options, {
      handlers: this.handlers,
      defaults: false,
      on: this.listeners,
      ...(logger ? { logger: logger as LoggerService } : {}),
    });
    return this;
  }

  /** The running host; before `start()` one built and never started (what its pause says then is the host's own answer). */
  private get host(): RedisStreamsServer | StreamConsumer {
    if (this.app) return this.app.consumer;
    const { logger: _, ...options } = this.options;
    return CORE_HOST ? new StreamConsumer({ ...options, logger: false }) : new RedisStreamsServer(options);
  }

  pause(pattern: string): Promise<boolean> {
    return this.host.pause(pattern);
  }

  resume(pattern: string): Promise<boolean> {
    return this.host.resume(pattern);
  }

  health(): ReturnType<StreamConsumer['health']> {
    return this.host.health();
  }

  close(): Promise<void> {
    return (this.closing ??= this.app ? this.app.close() : Promise.resolve());
  }
}

/** Request handlers for `client.send` tests; `Recorder.behavior` decides what `quote` answers. */
@Controller()
export class RequestsController {
  constructor(private readonly recorder: Recorder) {}

  @MessagePattern('quote', REDIS_STREAMS_TRANSPORT)
  quote(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
    return this.recorder.handle(payload, ctx);
  }
}
