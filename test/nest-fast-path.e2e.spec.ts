/**
 * Issue 52: an event handler with nothing bound to it skips Nest's handler chain (server/nest-fast-path.ts).
 * Each test binds one kind of enhancer in one scope and checks that it still runs (and that the entry took
 * Nest's full chain), or that what the fast path keeps (filters, errors, return values, logs) is what Nest's
 * chain gives. A test here fails when the fast path is taken where it must not be.
 */
import {
  Catch,
  Controller,
  createParamDecorator,
  Get,
  Injectable,
  Module,
  Scope,
  UseFilters,
  UseGuards,
  UseInterceptors,
  UsePipes,
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  type NestInterceptor,
  type PipeTransform,
  type RpcExceptionFilter,
} from '@nestjs/common';
import {
  APP_FILTER,
  APP_GUARD,
  APP_INTERCEPTOR,
  APP_PIPE,
  ContextIdFactory,
  NestFactory,
  type ContextId,
  type HostComponentInfo,
} from '@nestjs/core';
import { Ctx, EventPattern, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import {
  REDIS_STREAMS_TRANSPORT,
  RedisStreamsContext,
  RedisStreamsServer,
  StreamPattern,
  type SettledEvent,
  type StreamBatchEntry,
} from 'nestjs-redis-streams';
import { lastValueFrom, of, Subject, throwError, type Observable } from 'rxjs';
import { captureLogs } from './support/logs.js';
import { useProducers } from './support/producer.js';
import { CORE_HOST, uniquePrefix, useApps, type AppExtras, type TestApp } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();
const producer = useProducers();

/**
 * A handler's call: its arguments, whether it ran from the fast path (its frame is on the stack), and
 * whether through Nest's eventHandler and the proxy (`routed`) or called directly by the dispatch.
 */
interface Call {
  pattern: string;
  args: unknown[];
  fast: boolean;
  direct: boolean;
}
const calls: Call[] = [];
/** Which enhancers ran, in order. */
const ran: string[] = [];
beforeEach(() => {
  calls.length = 0;
  ran.length = 0;
});

function record(pattern: string, args: ArrayLike<unknown>): void {
  const stack = new Error().stack ?? '';
  const fast = /\bfastEventCall\b/.test(stack);
  calls.push({ pattern, args: Array.from(args), fast, direct: fast && !/\brouted\b/.test(stack) });
}
const callsOf = (pattern: string) => calls.filter((c) => c.pattern === pattern);

@Injectable()
class DenyGuard implements CanActivate {
  canActivate(): boolean {
    ran.push('guard');
    return false;
  }
}
@Injectable()
class MarkInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    ran.push('interceptor');
    return next.handle();
  }
}
/** Marks an object payload (any parameter Nest runs pipes on: payload and context). */
@Injectable()
class MarkPipe implements PipeTransform {
  transform(value: unknown): unknown {
    if (value && typeof value === 'object' && 'n' in value) {
      ran.push('pipe');
      return { ...value, piped: true };
    }
    return value;
  }
}
class Mapped extends Error {}
@Catch()
class MapFilter implements RpcExceptionFilter {
  catch(exception: unknown): Observable<never> {
    ran.push('filter');
    return throwError(() => new Mapped(`mapped: ${(exception as Error).message}`));
  }
}

/**
 * A controller with one `@StreamPattern(pattern)` method that records its call and then does `body`,
 * with the decorators given (`params`: one per parameter, in order; none: Nest's default, the payload).
 */
function controllerOf(
  pattern: string,
  o: {
    onClass?: ClassDecorator[];
    onMethod?: MethodDecorator[];
    params?: ParameterDecorator[];
    body?: (...args: unknown[]) => unknown;
    decorator?: (pattern: string) => MethodDecorator;
  } = {},
) {
  class C {
    handle(...args: unknown[]): unknown {
      record(pattern, args);
      return o.body?.(...args);
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(C.prototype, 'handle')!;
  (o.decorator ?? StreamPattern)(pattern)(C.prototype, 'handle', descriptor);
  for (const d of o.onMethod ?? []) d(C.prototype, 'handle', descriptor);
  (o.params ?? []).forEach((d, i) => d(C.prototype, 'handle', i));
  for (const d of [...(o.onClass ?? []), Controller()]) d(C);
  Object.defineProperty(C, 'name', { value: `Handler_${pattern}` });
  return C;
}

const options = () => ({
  connection: redis.connection,
  group: 'g',
  consumer: 'c',
  keyPrefix: uniquePrefix(),
  blockMs: 50,
  minIdleMs: 5_000,
});

async function startWith(controllers: unknown[], extra: Omit<AppExtras, 'controllers' | 'defaults'> = {}): Promise<TestApp> {
  return start(options(), { defaults: false, controllers, ...extra });
}

/** Emits `payloads` to `pattern` and waits until each is settled; their settled events, in order. */
async function deliver(app: TestApp, pattern: string, ...payloads: unknown[]): Promise<SettledEvent[]> {
  const { client } = await producer({ connection: redis.connection, keyPrefix: app.key('') });
  const ids: string[] = [];
  for (const p of payloads) ids.push((await lastValueFrom(client.emit(pattern, p))) as string);
  await waitFor(() => ids.every((id) => app.settled.some((e) => e.id === id)), {
    message: `${ids.length} entries of "${pattern}" settled`,
  });
  return ids.map((id) => app.settled.find((e) => e.id === id)!);
}

describe.skipIf(CORE_HOST)('Nest fast path: a handler with nothing bound skips the chain, and only that', () => {
  it('takes the fast path for a bare handler (the payload only) and for @Payload() @Ctx() (payload and context)', async () => {
    const app = await startWith([
      controllerOf('bare'),
      controllerOf('both', { params: [Payload(), Ctx()] }),
      controllerOf('ctx-only', { params: [() => undefined, Ctx()] }),
      controllerOf('nest-decorator', { params: [Payload(), Ctx()], decorator: (p) => EventPattern<string>(p) }),
    ]);
    const [bare] = await deliver(app, 'bare', { n: 1 });
    const [both, again] = await deliver(app, 'both', { n: 2 }, { n: 3 });
    await deliver(app, 'ctx-only', { n: 3 });
    await deliver(app, 'nest-decorator', { n: 4 });
    expect(bare!.outcome).toBe('acked');
    expect(both!.outcome).toBe('acked');
    // As Nest's pipes build them: the declared parameters, at their index; the rest undefined.
    expect(callsOf('bare').map((c) => c.args)).toEqual([[{ n: 1 }]]);
    const [[payload, ctx], [payload2, ctx2]] = callsOf('both').map((c) => c.args) as [
      [unknown, RedisStreamsContext],
      [unknown, RedisStreamsContext],
    ];
    expect([payload, payload2]).toEqual([{ n: 2 }, { n: 3 }]);
    expect(ctx).toBeInstanceOf(RedisStreamsContext);
    expect([ctx!.getId(), ctx2!.getId()]).toEqual([both!.id, again!.id]);
    // The first call learns, through Nest's eventHandler, which fast proxy it calls; the next skips it.
    expect(callsOf('both').map((c) => c.direct)).toEqual([false, true]);
    const [ctxOnly] = callsOf('ctx-only').map((c) => c.args);
    expect(ctxOnly).toHaveLength(2);
    expect(ctxOnly![0]).toBeUndefined();
    expect(ctxOnly![1]).toBeInstanceOf(RedisStreamsContext);
    expect(calls.map((c) => [c.pattern, c.fast])).toEqual([
      ['bare', true],
      ['both', true],
      ['both', true],
      ['ctx-only', true],
      ['nest-decorator', true],
    ]);
  });

  describe('guards run in every scope', () => {
    const scopes: [string, () => unknown[], AppExtras][] = [
      ['global (app.useGlobalGuards)', () => [controllerOf('g')], { configure: (app) => app.useGlobalGuards(new DenyGuard()) }],
      ['global (APP_GUARD provider)', () => [controllerOf('g')], { providers: [{ provide: APP_GUARD, useClass: DenyGuard }] }],
      ['controller (@UseGuards on the class)', () => [controllerOf('g', { onClass: [UseGuards(DenyGuard)] })], {}],
      ['method (@UseGuards on the handler)', () => [controllerOf('g', { onMethod: [UseGuards(DenyGuard)] })], {}],
    ];
    it.each(scopes)('%s: the guard refuses, the handler is not called, the entry fails', async (_scope, controllers, extra) => {
      const app = await startWith(controllers(), extra);
      const [settled] = await deliver(app, 'g', { n: 1 });
      expect(ran).toContain('guard');
      expect(callsOf('g')).toEqual([]);
      expect(settled!.outcome).toBe('failed');
      expect(settled!.error).toBeInstanceOf(RpcException);
      expect((settled!.error as RpcException).message).toBe('Forbidden resource');
    });
  });

  describe('interceptors run in every scope', () => {
    const scopes: [string, () => unknown[], AppExtras][] = [
      [
        'global (app.useGlobalInterceptors)',
        () => [controllerOf('i')],
        { configure: (app) => app.useGlobalInterceptors(new MarkInterceptor()) },
      ],
      [
        'global (APP_INTERCEPTOR provider)',
        () => [controllerOf('i')],
        { providers: [{ provide: APP_INTERCEPTOR, useClass: MarkInterceptor }] },
      ],
      ['controller (@UseInterceptors on the class)', () => [controllerOf('i', { onClass: [UseInterceptors(MarkInterceptor)] })], {}],
      ['method (@UseInterceptors on the handler)', () => [controllerOf('i', { onMethod: [UseInterceptors(MarkInterceptor)] })], {}],
    ];
    it.each(scopes)('%s: the interceptor runs around the handler', async (_scope, controllers, extra) => {
      const app = await startWith(controllers(), extra);
      const [settled] = await deliver(app, 'i', { n: 1 });
      expect(settled!.outcome).toBe('acked');
      expect(ran).toEqual(['interceptor']);
      expect(callsOf('i').map((c) => c.fast)).toEqual([false]);
    });
  });

  describe('pipes run in every scope', () => {
    const scopes: [string, () => unknown[], AppExtras][] = [
      ['global (app.useGlobalPipes)', () => [controllerOf('p')], { configure: (app) => app.useGlobalPipes(new MarkPipe()) }],
      ['global (APP_PIPE provider)', () => [controllerOf('p')], { providers: [{ provide: APP_PIPE, useClass: MarkPipe }] }],
      ['controller (@UsePipes on the class)', () => [controllerOf('p', { onClass: [UsePipes(MarkPipe)] })], {}],
      ['method (@UsePipes on the handler)', () => [controllerOf('p', { onMethod: [UsePipes(MarkPipe)] })], {}],
      ['parameter (@Payload(pipe))', () => [controllerOf('p', { params: [Payload(MarkPipe)] })], {}],
    ];
    it.each(scopes)('%s: the handler gets the piped payload', async (_scope, controllers, extra) => {
      const app = await startWith(controllers(), extra);
      const [settled] = await deliver(app, 'p', { n: 1 });
      expect(settled!.outcome).toBe('acked');
      expect(callsOf('p').map((c) => c.args[0])).toEqual([{ n: 1, piped: true }]);
      expect(callsOf('p').map((c) => c.fast)).toEqual([false]);
    });
  });

  describe('exception filters run in every scope, on the fast path too', () => {
    const throwing = { body: () => Promise.reject(new Error('declined')) };
    const scopes: [string, () => unknown[], AppExtras][] = [
      ['global (app.useGlobalFilters)', () => [controllerOf('f', throwing)], { configure: (app) => app.useGlobalFilters(new MapFilter()) }],
      ['global (APP_FILTER provider)', () => [controllerOf('f', throwing)], { providers: [{ provide: APP_FILTER, useClass: MapFilter }] }],
      ['controller (@UseFilters on the class)', () => [controllerOf('f', { ...throwing, onClass: [UseFilters(MapFilter)] })], {}],
      ['method (@UseFilters on the handler)', () => [controllerOf('f', { ...throwing, onMethod: [UseFilters(MapFilter)] })], {}],
    ];
    it.each(scopes)("%s: the filter's error is the entry's, through the proxy and called directly", async (_scope, controllers, extra) => {
      const app = await startWith(controllers(), extra);
      const settled = await deliver(app, 'f', { n: 1 }, { n: 2 });
      expect(ran).toEqual(['filter', 'filter']);
      for (const e of settled) {
        expect(e.outcome).toBe('failed');
        expect(e.error).toBeInstanceOf(Mapped);
        expect((e.error as Error).message).toBe('mapped: declined');
      }
      // Filters need no chain: they take the error the fast path hands to Nest's exception handler.
      expect(callsOf('f').map((c) => [c.fast, c.direct])).toEqual([
        [true, false],
        [true, true],
      ]);
    });
  });

  it("@Payload('field') and a custom parameter decorator get what Nest gives them", async () => {
    const EntryId = createParamDecorator((_data: unknown, ctx: ExecutionContext) => {
      ran.push('decorator');
      return ctx.switchToRpc().getContext<RedisStreamsContext>().getId();
    });
    const app = await startWith([
      controllerOf('field', { params: [Payload('order')] }),
      controllerOf('custom', { params: [Payload(), EntryId()] }),
    ]);
    await deliver(app, 'field', { order: 'o-1', n: 1 });
    const [custom] = await deliver(app, 'custom', { n: 2 });
    expect(callsOf('field').map((c) => c.args)).toEqual([['o-1']]);
    expect(callsOf('custom').map((c) => c.args)).toEqual([[{ n: 2 }, custom!.id]]);
    expect(ran).toEqual(['decorator']);
    expect(calls.map((c) => c.fast)).toEqual([false, false]);
  });

  it('a request-scoped provider in the controller: a new instance per entry, as Nest makes it', async () => {
    let made = 0;
    @Injectable({ scope: Scope.REQUEST })
    class PerEntry {
      readonly serial = ++made;
    }
    @Controller()
    class Scoped {
      constructor(private readonly perEntry: PerEntry) {}
      @StreamPattern('scoped')
      handle(@Payload() payload: unknown) {
        record('scoped', [payload, this.perEntry.serial]);
      }
    }
    const app = await startWith([Scoped], { providers: [PerEntry] });
    const settled = await deliver(app, 'scoped', { n: 1 }, { n: 2 });
    expect(settled.map((e) => e.outcome)).toEqual(['acked', 'acked']);
    expect(callsOf('scoped').map((c) => c.args)).toEqual([
      [{ n: 1 }, 1],
      [{ n: 2 }, 2],
    ]);
    expect(made).toBe(2);
  });

  it('a durable provider: one instance per tenant, as the context id strategy says', async () => {
    let made = 0;
    @Injectable({ scope: Scope.REQUEST, durable: true })
    class PerTenant {
      readonly serial = ++made;
    }
    @Controller()
    class Durable {
      constructor(private readonly perTenant: PerTenant) {}
      @StreamPattern('durable')
      handle(@Payload() payload: { tenant: string }) {
        record('durable', [payload.tenant, this.perTenant.serial]);
      }
    }
    // Nest's strategy is process-wide: one sub-tree per tenant (the payload's), set for this test only.
    const tenants = new Map<string, ContextId>();
    ContextIdFactory.apply({
      attach: (contextId: ContextId, request: { data?: { tenant?: string } }) => {
        const tenant = request.data?.tenant ?? '';
        if (!tenants.has(tenant)) tenants.set(tenant, ContextIdFactory.create());
        return (info: HostComponentInfo) => (info.isTreeDurable ? tenants.get(tenant)! : contextId);
      },
    });
    try {
      const app = await startWith([Durable], { providers: [PerTenant] });
      const settled = await deliver(app, 'durable', { tenant: 'a' }, { tenant: 'b' }, { tenant: 'a' });
      expect(settled.map((e) => e.outcome)).toEqual(['acked', 'acked', 'acked']);
      expect(callsOf('durable').map((c) => [...c.args, c.fast])).toEqual([
        ['a', 1, false],
        ['b', 2, false],
        ['a', 1, false],
      ]);
    } finally {
      (ContextIdFactory as unknown as { strategy: unknown }).strategy = undefined;
    }
  });

  it('a transient provider in a static controller: the handler takes the fast path with its instance', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    class Helper {
      readonly tag = 'helper';
    }
    @Controller()
    class UsesTransient {
      constructor(private readonly helper: Helper) {}
      @StreamPattern('transient')
      handle(@Payload() payload: unknown) {
        record('transient', [payload, this.helper.tag]);
      }
    }
    const app = await startWith([UsesTransient], { providers: [Helper] });
    await deliver(app, 'transient', { n: 1 });
    expect(callsOf('transient').map((c) => [c.args, c.fast])).toEqual([[[{ n: 1 }, 'helper'], true]]);
  });

  it("Nest's pre-request hooks run (Nest 12)", async (t) => {
    const app = await startWith([controllerOf('hooked')], {
      configure: (nest) => {
        const register = (nest as { registerPreRequestHook?: (...hooks: unknown[]) => void }).registerPreRequestHook;
        if (!register) return;
        register.call(nest, (_ctx: ExecutionContext, next: () => Observable<unknown>) => {
          ran.push('pre-request hook');
          return next();
        });
      },
    });
    if (!(app.app as { registerPreRequestHook?: unknown }).registerPreRequestHook) t.skip('Nest 11 has no pre-request hooks');
    await deliver(app, 'hooked', { n: 1 });
    expect(ran).toEqual(['pre-request hook']);
    expect(callsOf('hooked').map((c) => c.fast)).toEqual([false]);
  });

  it('two handlers on one pattern: both run, each with what is bound to it', async () => {
    const app = await startWith([controllerOf('twice'), controllerOf('twice', { onMethod: [UseInterceptors(MarkInterceptor)] })]);
    const [settled] = await deliver(app, 'twice', { n: 1 });
    expect(settled!.outcome).toBe('acked');
    expect(callsOf('twice')).toHaveLength(2);
    expect(ran).toEqual(['interceptor']);
  });

  it("a batch handler keeps Nest's chain: its interceptor runs", async () => {
    @Controller()
    class Batch {
      @StreamPattern('batch', { batch: { maxSize: 2, maxWaitMs: 50 } })
      @UseInterceptors(MarkInterceptor)
      handle(@Payload() entries: StreamBatchEntry[]) {
        record('batch', [entries.map((e) => e.payload)]);
      }
    }
    const app = await startWith([Batch]);
    const settled = await deliver(app, 'batch', { n: 1 });
    expect(settled.map((e) => e.outcome)).toEqual(['acked']);
    expect(ran).toEqual(['interceptor']);
    expect(callsOf('batch').map((c) => [c.args, c.fast])).toEqual([[[[{ n: 1 }]], false]]);
  });

  it("a request (send) keeps Nest's chain, and its reply", async () => {
    @Controller()
    class Quotes {
      @MessagePattern('quote', REDIS_STREAMS_TRANSPORT)
      quote(@Payload() payload: { n: number }) {
        record('quote', [payload]);
        return { price: payload.n * 2 };
      }
    }
    const app = await startWith([Quotes]);
    const { client } = await producer({ connection: redis.connection, keyPrefix: app.key('') });
    await expect(lastValueFrom(client.send('quote', { n: 21 }))).resolves.toEqual({ price: 42 });
    expect(callsOf('quote').map((c) => c.fast)).toEqual([false]);
  });
});

describe.skipIf(CORE_HOST)('Nest fast path: what the entry and the logs show is what the full chain shows', () => {
  /**
   * Each behaviour on two handlers: one bare (the fast path), one with a pass-through interceptor (Nest's
   * full chain). The settled outcome, the error handed over and every log line (ids and pattern aside) must agree.
   */
  const behaviours: [string, () => unknown][] = [
    ['a sync value', () => 'done'],
    ['a resolved promise', () => Promise.resolve('done')],
    ['an Observable of values', () => of('a', 'b')],
    ['a promise of an erroring Observable', () => Promise.resolve(throwError(() => new Error('late stream boom')))],
    [
      'a sync throw',
      () => {
        throw new Error('sync boom');
      },
    ],
    ['a rejected promise', () => Promise.reject(new Error('async boom'))],
    ['an erroring Observable', () => throwError(() => new Error('stream boom'))],
    [
      'an RpcException',
      () => {
        throw new RpcException({ code: 'E42' });
      },
    ],
    ['a thrown string', () => Promise.reject('just a string')],
  ];
  it.each(behaviours)('%s', async (_label, body) => {
    const logs = captureLogs();
    const app = await startWith(
      [
        controllerOf('fast', { body, params: [Payload(), Ctx()] }),
        controllerOf('full', { body, params: [Payload(), Ctx()], onMethod: [UseInterceptors(MarkInterceptor)] }),
      ],
      { logger: logs.logger },
    );
    // Two entries each: the fast handler's first goes through Nest's eventHandler and the proxy, its second is called directly.
    const fasts = await deliver(app, 'fast', { n: 1 }, { n: 2 });
    const fulls = await deliver(app, 'full', { n: 1 }, { n: 2 });
    expect(calls.map((c) => [c.pattern, c.fast, c.direct])).toEqual([
      ['fast', true, false],
      ['fast', true, true],
      ['full', false, false],
      ['full', false, false],
    ]);
    // Every line that names the entry, with its id and stream put aside.
    const lines = (pattern: string, id: string) =>
      logs.lines
        .filter((l) => l.includes(id))
        .map((l) =>
          l
            .replaceAll(id, '<id>')
            .replaceAll(app.key(pattern), '<stream>')
            .replace(/idle \d+ ms/, 'idle <n> ms'),
        );
    for (const [i, fast] of fasts.entries()) {
      const full = fulls[i]!;
      expect(fast.outcome).toBe(full.outcome);
      if (full.error instanceof Error) {
        expect(fast.error).toBeInstanceOf(full.error.constructor);
        expect((fast.error as Error).message).toBe(full.error.message);
      } else expect(fast.error).toEqual(full.error);
      expect(lines('fast', fast.id)).toEqual(lines('full', full.id));
      if (full.outcome !== 'acked') expect(lines('full', full.id)).not.toEqual([]);
    }
    expect(logs.from('RpcExceptionsHandler')).toEqual([]);
  });

  it('an Observable that has not completed holds the entry; its completion acks it', async () => {
    const subject = new Subject<string>();
    const app = await startWith([controllerOf('open', { body: () => subject.asObservable() })]);
    const { client } = await producer({ connection: redis.connection, keyPrefix: app.key('') });
    const id = (await lastValueFrom(client.emit('open', { n: 1 }))) as string;
    await waitFor(() => callsOf('open').length === 1, { message: 'the handler called' });
    expect(callsOf('open')[0]!.fast).toBe(true);
    subject.next('first');
    expect(((await redis.client().xpending(app.key('open'), 'g')) as [number])[0]).toBe(1);
    expect(app.settled).toEqual([]);
    subject.complete();
    await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'acked'), { message: 'the entry acked on completion' });
  });
});

describe.skipIf(CORE_HOST)('Nest fast path in a hybrid app (HTTP and this transport)', () => {
  const apps: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function hybrid(inheritAppConfig: boolean) {
    @Controller('http')
    class Http {
      @Get('ping')
      ping() {
        return 'pong';
      }
    }
    @Module({ controllers: [controllerOf('hybrid'), Http] })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    apps.push(app);
    const server = new RedisStreamsServer(options());
    const settled: SettledEvent[] = [];
    server.on('settled', (e) => settled.push(e));
    app.useGlobalGuards(new DenyGuard());
    app.connectMicroservice({ strategy: server }, { inheritAppConfig });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    // The HTTP side answers, behind the same global guard.
    const response = await fetch(`${await app.getUrl()}/http/ping`);
    expect(response.status).toBe(403);
    ran.length = 0;
    return { app, server, settled, key: server.options.keyPrefix ?? '' };
  }

  it("inheritAppConfig: the HTTP app's global guard runs for the transport's handler", async () => {
    const { settled, key } = await hybrid(true);
    const { client } = await producer({ connection: redis.connection, keyPrefix: key });
    const id = (await lastValueFrom(client.emit('hybrid', { n: 1 }))) as string;
    await waitFor(() => settled.some((e) => e.id === id), { message: 'the entry settled' });
    expect(ran).toContain('guard');
    expect(callsOf('hybrid')).toEqual([]);
    expect(settled.find((e) => e.id === id)!.outcome).toBe('failed');
  });

  it("without inheritAppConfig the HTTP app's guard is not the transport's (as in Nest): the fast path", async () => {
    const { settled, key } = await hybrid(false);
    const { client } = await producer({ connection: redis.connection, keyPrefix: key });
    const id = (await lastValueFrom(client.emit('hybrid', { n: 1 }))) as string;
    await waitFor(() => settled.some((e) => e.id === id), { message: 'the entry settled' });
    expect(ran).toEqual([]);
    expect(callsOf('hybrid').map((c) => c.fast)).toEqual([true]);
    expect(settled.find((e) => e.id === id)!.outcome).toBe('acked');
  });
});
