import {
  Inject,
  Logger,
  Module,
  RequestMethod,
  type BeforeApplicationShutdown,
  type DynamicModule,
  type FactoryProvider,
  type ModuleMetadata,
  type Provider,
  type MiddlewareConsumer,
  type NestModule,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { CanActivate } from '@nestjs/common';
import { lastValueFrom, type Observable } from 'rxjs';
import type { IncomingMessage } from 'node:http';
import { createDashboardHandler, type DashboardHandler } from '../dashboard/dashboard-http.js';
import type { DashboardOptions } from '../dashboard/dashboard-options.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { resolveConnection, type ConnectionOption } from '../options/connection.js';
import { InvalidOptionError, rejectUnknown } from '../options/validate.js';
import { resolveDashboardOptions } from '../dashboard/dashboard-options.js';
import { ReportedConnection } from '../redis/connection/reported-connection.js';

/** A Nest guard, or a function of the request: true lets it through. */
export type DashboardGuard = CanActivate | ((req: IncomingMessage) => boolean | Promise<boolean>);

export interface RedisStreamsDashboardModuleOptions extends Omit<DashboardOptions, 'actions' | 'read'> {
  /** Where it is mounted, e.g. `/dashboard` (required: it shares the app's routes). */
  basePath: string;
  /** The Redis it reads: the same option as the transport's (URL, options, or cluster nodes). */
  connection?: ConnectionOption;
  /**
   * Actions (redrive, delete) are off unless given: the guard decides who may act (return false to
   * refuse), and `who` names them in the action log (default: "app").
   */
  actions?: { guard: DashboardGuard; who?: (req: IncomingMessage) => string };
  /**
   * Who may read: every page and call under `basePath` goes through the guard first (403 when it
   * refuses or throws). The module is middleware, so the app's own guards never run for it: without
   * this, anyone who reaches the app's port reads entry payloads. Default: anyone.
   */
  read?: { guard: DashboardGuard };
  /** The app's own transport (a `RedisStreamsServer`): its consumer's health is shown beside the streams. */
  server?: { health(): Promise<RedisStreamsHealth> };
}

/** `RedisStreamsDashboardModule.registerAsync`: the options from a factory, with the providers it injects. */
export interface RedisStreamsDashboardModuleAsyncOptions {
  /** Modules whose providers `inject` names (a config module). */
  imports?: ModuleMetadata['imports'];
  inject?: NonNullable<FactoryProvider['inject']>;
  useFactory: (...args: any[]) => RedisStreamsDashboardModuleOptions | Promise<RedisStreamsDashboardModuleOptions>;
}

const OPTIONS = Symbol('redis-streams-dashboard-options');
const HANDLER = Symbol('redis-streams-dashboard-handler');
const COMMAND_TIMEOUT_MS = 5_000;
const CONNECTION = Symbol('redis-streams-dashboard-connection');

/**
 * The dashboard inside a Nest HTTP app (Express or Fastify): `RedisStreamsDashboardModule.register({ basePath: '/dashboard', connection })`.
 * Served as middleware under `basePath`, on a connection of its own that closes with the app.
 */
@Module({})
export class RedisStreamsDashboardModule implements NestModule, BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(
    @Inject(HANDLER) private readonly handler: DashboardHandler,
    @Inject(CONNECTION) private readonly redis: ReportedConnection,
  ) {}

  /** The dashboard with its options now (checked here: a wrong one throws, naming it). */
  static register(options: RedisStreamsDashboardModuleOptions): DynamicModule {
    return RedisStreamsDashboardModule.build([{ provide: OPTIONS, useValue: checkedOptions(options) }], []);
  }

  /**
   * The dashboard with its options from a factory, at bootstrap: `useFactory` with `inject` (and the `imports` that
   * provide them); not `useClass` or `useExisting`. Its options are checked as `register`'s, when the app starts.
   */
  static registerAsync(options: RedisStreamsDashboardModuleAsyncOptions): DynamicModule {
    if (typeof options !== 'object' || options === null)
      throw new InvalidOptionError('registerAsync', 'must be { useFactory, inject?, imports? }');
    rejectUnknown(options, ['useFactory', 'inject', 'imports'], 'registerAsync.');
    const { useFactory, inject = [], imports = [] } = options;
    if (typeof useFactory !== 'function')
      throw new InvalidOptionError(
        'registerAsync.useFactory',
        'must be a function returning the options (useClass and useExisting are not taken)',
      );
    return RedisStreamsDashboardModule.build(
      [
        { provide: OPTIONS, inject, useFactory: async (...args: unknown[]) => checkedOptions(await useFactory(...args)) },
        // Each call a module of its own, whatever id algorithm Nest uses (its deep hash would merge two registerAsync calls).
        { provide: Symbol('redis-streams-dashboard-instance'), useValue: Symbol('instance') },
      ],
      imports,
    );
  }

  private static build(optionProviders: Provider[], imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
    return {
      module: RedisStreamsDashboardModule,
      imports,
      providers: [
        ...optionProviders,
        // A command timeout: a frozen Redis fails the page's calls instead of holding them. Its trouble
        // goes to the app's logger, one line per change of state.
        {
          provide: CONNECTION,
          inject: [OPTIONS],
          useFactory: (options: RedisStreamsDashboardModuleOptions) =>
            new ReportedConnection(
              resolveConnection(options.connection),
              'redis-streams:dashboard',
              // ReportedConnection guards it: a logger that throws costs the line, not the process.
              new Logger(RedisStreamsDashboardModule.name),
              COMMAND_TIMEOUT_MS,
            ),
        },
        {
          provide: HANDLER,
          inject: [CONNECTION, OPTIONS],
          useFactory: (redis: ReportedConnection, options: RedisStreamsDashboardModuleOptions) => {
            const { connection: _connection, actions, read, server, ...rest } = options;
            return createDashboardHandler(
              redis.conn,
              {
                ...rest,
                ...(server ? { consumer: server } : {}),
                ...(actions ? { actions: { authorize: guardAuthorize(actions.guard, actions.who ?? (() => 'app')) } } : {}),
                ...(read ? { read: { authorize: guardAuthorize(read.guard, () => 'reader') } } : {}),
              },
              (err) => redis.unanswered(err),
            );
          },
        },
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    // Every path: the handler passes on (next) whatever is not under basePath.
    consumer.apply(this.handler).forRoutes({ path: '{*path}', method: RequestMethod.ALL });
  }

  /** Before the HTTP server closes: an open page's kept-alive connection must not hold it. */
  beforeApplicationShutdown(): void {
    this.handler.drain();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.redis.close();
  }
}

/** The module's options, checked (each wrong one named); the same object back. */
function checkedOptions(options: RedisStreamsDashboardModuleOptions): RedisStreamsDashboardModuleOptions {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError('options', 'must be an object such as { basePath, connection }');
  const { actions, read, server, basePath } = options;
  // It shares the app's routes: at the root it would answer every path the app has.
  if (typeof basePath !== 'string' || basePath.replace(/\/+$/, '') === '')
    throw new InvalidOptionError(
      'basePath',
      `must be a path such as "/dashboard" (the dashboard shares the app's routes), got ${JSON.stringify(basePath)}`,
    );
  for (const [name, given] of [
    ['actions', actions],
    ['read', read],
  ] as const) {
    const guard = (given as { guard?: unknown } | null)?.guard;
    if (given === undefined) continue;
    if (!isGuard(guard)) throw new InvalidOptionError(name, `must be { guard }: a Nest guard (canActivate) or a function of the request`);
    // The @UseGuards habit: a class where an instance is wanted would be called without new, and refuse every request.
    if (typeof guard === 'function' && typeof (guard as { prototype?: { canActivate?: unknown } }).prototype?.canActivate === 'function')
      throw new InvalidOptionError(name, `a guard class: pass an instance (new ${guard.name || 'YourGuard'}())`);
  }
  if ('server' in options && (typeof server !== 'object' || server === null || typeof server.health !== 'function'))
    throw new InvalidOptionError('server', "must be the app's RedisStreamsServer (anything with health())");
  // The dashboard's own options too (match, pageSize, a typo …), before any connection opens: a bootstrap that fails
  // after it would leave it open, and the process running (review finding).
  const { connection: _connection, actions: _actions, read: _read, server: _server, ...rest } = options;
  const stand = { authorize: () => null };
  resolveDashboardOptions({ ...rest, ...(actions ? { actions: stand } : {}), ...(read ? { read: stand } : {}) });
  return options;
}

function isGuard(guard: unknown): guard is DashboardGuard {
  return (
    typeof guard === 'function' || (typeof guard === 'object' && guard !== null && typeof (guard as CanActivate).canActivate === 'function')
  );
}

/** A Nest guard (or a function) as the dashboard's authorize: a guard sees the request through a minimal HTTP execution context. */
function guardAuthorize(guard: DashboardGuard, who: (req: IncomingMessage) => string) {
  return async (req: IncomingMessage): Promise<string | null> => {
    const context = {
      getType: () => 'http',
      switchToHttp: () => ({ getRequest: () => req, getResponse: () => undefined, getNext: () => undefined }),
      getClass: () => RedisStreamsDashboardModule,
      getHandler: () => guardAuthorize,
      getArgs: () => [req],
      getArgByIndex: (i: number) => (i === 0 ? req : undefined),
      switchToRpc: () => {
        throw new Error('the dashboard is HTTP');
      },
      switchToWs: () => {
        throw new Error('the dashboard is HTTP');
      },
    };
    const allowed = await Promise.resolve()
      .then(() => (typeof guard === 'function' ? guard(req) : guard.canActivate(context as never)))
      .catch(() => false);
    // An Observable's last value (Nest's own rule: lastValueFrom; none or an error refuses), else truthy as Nest reads a guard's answer.
    const verdict =
      typeof (allowed as { subscribe?: unknown } | null)?.subscribe === 'function'
        ? await lastValueFrom(allowed as Observable<unknown>, { defaultValue: false }).catch(() => false)
        : allowed;
    return verdict ? who(req) : null;
  };
}
