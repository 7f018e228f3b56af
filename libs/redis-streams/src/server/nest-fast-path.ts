import { STATIC_CONTEXT } from '@nestjs/core/injector/constants.js';
import { RpcContextCreator } from '@nestjs/microservices/context/rpc-context-creator.js';
import { ListenersController } from '@nestjs/microservices/listeners-controller.js';
import { createHash } from 'node:crypto';
import { catchError, isObservable, type Observable } from 'rxjs';

/*
 * Nest's handler chain for an event (its listener's eventHandler → RpcProxy → guards → interceptors →
 * pipes → handler) makes a dozen promises per entry even when nothing is bound to the handler: about
 * 1.8 µs of the Nest host's per-entry cost. The transport is handed only the finished handler (in
 * `addHandler`), so it cannot see what is bound; Nest's `RpcContextCreator.create` can. It is wrapped
 * here, once per process: after Nest's own create it asks Nest's own context creators, with the same
 * arguments, what runs for that handler (guards, interceptors and pipes of every scope as Nest resolves
 * them: app.useGlobal*, APP_* providers, class, method and parameter; parameter decorators; pre-request
 * hooks; a request or durable scope). When that is nothing, the proxy it returns runs the handler
 * directly for the one call our dispatch marks (a single event entry), and is Nest's own proxy for any
 * other call (requests, batches, other transports). Errors still go to the exception handler Nest
 * builds for the handler (method, controller and global filters; the default one, hooked by
 * original-errors.ts), handed over as Nest's RpcProxy hands them: filters need no chain.
 *
 * Why not our own decorator or Nest's metadata: `@EventPattern` handlers bypass our decorator, and the
 * transport has neither the controller instance nor the ApplicationConfig (global enhancers); Nest's
 * creators have both. The cost is reliance on Nest's internals. So the fast path stands in only for
 * Nest code it was checked against, by fingerprint: another Nest version, a bundled or patched Nest,
 * and nothing changes but the speed (every entry takes Nest's full chain). CI runs the equivalence
 * tests on Nest 12 and 11 (test/nest-fast-path.e2e.spec.ts), which fail when the fast path is off.
 */

/** Nest's RpcParamtype (microservices/enums/rpc-paramtype.enum.js), the same in Nest 11 and 12. */
const PAYLOAD = 3;
const CONTEXT = 6;

/**
 * Fingerprints (see `fingerprint`) of the Nest functions the fast proxy stands in for, as reviewed:
 * RpcContextCreator's create and what it calls to build the chain, RpcProxy, the interceptors'
 * consumer, the RPC parameters' factory.
 */
const CHECKED_CHAIN_CODE = new Set<string>([
  '9199c6f6ff6ac41e89a510d92d251a3c6b9f15c5aa822878027fb9dd0a61d57b', // @nestjs/microservices 12.1.1, @nestjs/core 12.5.1
  // @nestjs/core 12.6.3 rewrote InterceptorsConsumer.intercept's chain of interceptors; the branch the fast path stands
  // in for (no interceptor: `return next()`) is unchanged (review of issue 52: npm's latest turned the fast path off).
  'b79673568d9973c8f86beade7545c7b801af2feb3d9014486d56b5e92612f959', // @nestjs/microservices 12.1.1, @nestjs/core 12.6.3
  '4159f12b904ef22a57e5dd9f70d97a0d7e370dd454cb44d20ef97ee12ae24873', // @nestjs/microservices 11.2.6, @nestjs/core 11.2.12
]);
/** Fingerprints of Nest's static eventHandler (ListenersController) with its forkJoinHandlersIfAttached, as reviewed. */
const CHECKED_EVENT_HANDLER_CODE = new Set<string>([
  'ace3e4584680db4e0b6dbc70d09f3209f02e8243dea67ef36ad0688da5b46767', // @nestjs/microservices 12.1.1
  'ed642a52ba3d0baf0238fc8344ea2866bd7401c266b81ec0364c23dcea5cc767', // @nestjs/microservices 11.2.6
]);

/** Fields of Nest 11's and 12's RpcContextCreator: one more (another part of the chain?) means the full chain. */
const KNOWN_FIELDS = new Set([
  'rpcProxy',
  'exceptionFiltersContext',
  'pipesContextCreator',
  'pipesConsumer',
  'guardsContextCreator',
  'guardsConsumer',
  'interceptorsContextCreator',
  'interceptorsConsumer',
  'applicationConfig',
  'contextUtils',
  'rpcParamsFactory',
  'handlerMetadataStorage',
]);

type Fn = (...args: any[]) => any;
/** The members of Nest's RpcContextCreator read here; protected or private there. */
interface ContextCreator {
  rpcProxy: { create: Fn; handleError(handler: unknown, args: unknown[], error: unknown, reportUnhandled?: boolean): Observable<unknown> };
  exceptionFiltersContext: { create(...args: unknown[]): unknown };
  pipesContextCreator: { create(...args: unknown[]): unknown };
  guardsContextCreator: { create(...args: unknown[]): unknown };
  interceptorsContextCreator: { create(...args: unknown[]): unknown };
  interceptorsConsumer: { intercept: Fn };
  rpcParamsFactory: { exchangeKeyForValue: Fn };
  applicationConfig?: { getGlobalPreRequestHooks?(): unknown };
  getMetadata(
    instance: object,
    methodName: string,
    defaultCallMetadata: unknown,
    contextType: string,
  ): { argsLength: number; getParamsMetadata(moduleKey: string): { index: number; type: unknown; data: unknown; pipes: unknown[] }[] };
}
type Create = (
  this: ContextCreator,
  instance: object,
  callback: Fn,
  moduleKey: string,
  methodName: string,
  contextId?: unknown,
  inquirerId?: unknown,
  defaultCallMetadata?: unknown,
  reportUnhandledErrors?: boolean,
) => Fn;
/**
 * A handler called as Nest's proxy would call it with no chain. Without `then`: what that proxy's
 * promise resolves to (a value, or an Observable whose errors go to the exception handler). With
 * `then`: a promise of `then` of that, one promise hop fewer for the dispatch.
 */
type FastCall = (payload: unknown, ctx: unknown, then?: (resolved: unknown) => unknown) => unknown;

/**
 * The one call the dispatch lets take the fast path: `ctx` is set around its call of an event
 * handler and taken by the first proxy called with that context, which leaves its FastCall in `fast`.
 * Shared by the package's two builds (one patch of Nest serves both).
 */
interface Slot {
  ctx: object | undefined;
  fast: FastCall | undefined;
}
const slot = ((globalThis as Record<symbol, unknown>)[Symbol.for('nestjs-redis-streams/fast-call')] ??= {
  ctx: undefined,
  fast: undefined,
}) as Slot;
/** On RpcContextCreator.prototype once wrapped: Nest's own create. */
const NEST_CREATE = Symbol.for('nestjs-redis-streams/nest-create');
/** Per event handler Nest registered, its proxy's FastCall (learnt on its first call), or false: not Nest's eventHandler. */
const direct = new WeakMap<object, FastCall | false>();

/** Wraps Nest's RpcContextCreator.create (idempotent, once per process). */
export function installFastPath(): void {
  const proto = RpcContextCreator.prototype as unknown as Record<PropertyKey, unknown> & { create: Create };
  if (proto[NEST_CREATE]) return;
  const create = proto.create;
  Object.defineProperty(proto, NEST_CREATE, { value: create });
  const checked = new WeakMap<object, boolean>();
  proto.create = function (
    this: ContextCreator,
    instance,
    callback,
    moduleKey,
    methodName,
    contextId,
    inquirerId,
    defaultCallMetadata,
    report,
  ) {
    // eslint-disable-next-line prefer-rest-params
    const proxy: Fn = create.apply(this, arguments as unknown as Parameters<Create>);
    let known = checked.get(this);
    if (known === undefined) checked.set(this, (known = isCheckedChain(this, create)));
    if (!known) return proxy;
    let fast: FastCall;
    try {
      const args = argsOf(this, instance, callback, moduleKey, methodName, contextId, inquirerId, defaultCallMetadata);
      if (!args) return proxy;
      const exceptionHandler = this.exceptionFiltersContext.create(instance, callback, moduleKey, contextId, inquirerId);
      fast = fastCall(this, instance, callback, args, exceptionHandler, report);
    } catch {
      // Nest's create made the same calls without failing: whatever failed here, the full chain.
      return proxy;
    }
    return function routed(this: unknown, ...callArgs: unknown[]) {
      const ctx = callArgs[1];
      // Nest's pipes await each argument: a thenable payload is adopted there, so it takes Nest's way.
      if (ctx !== undefined && ctx === slot.ctx && callArgs.length === 2 && !isThenable(callArgs[0])) {
        slot.ctx = undefined;
        slot.fast = fast;
        return fast(callArgs[0], ctx);
      }
      return proxy.apply(this, callArgs);
    };
  } satisfies Create;
}

/**
 * The dispatch's call of an event handler Nest registered: `then` of what its proxy resolves to.
 * Its proxy may take the fast path; once it has, a handler that is Nest's own eventHandler (checked
 * by fingerprint) is skipped too, its FastCall called directly. A handler chained with others on one
 * pattern (Nest forkJoins them) always takes Nest's way, as does a thenable payload.
 */
export function callEventHandler(
  handler: Fn & { next?: unknown },
  payload: unknown,
  ctx: object,
  then: (resolved: unknown) => unknown,
): Promise<unknown> {
  if (handler.next) return Promise.resolve(handler(payload, ctx)).then(then);
  const fast = direct.get(handler);
  if (fast && !isThenable(payload)) {
    try {
      return fast(payload, ctx, then) as Promise<unknown>;
    } catch (err) {
      // A filter that throws: Nest's async eventHandler would reject with it.
      return Promise.reject(err);
    }
  }
  slot.ctx = ctx;
  slot.fast = undefined;
  try {
    return Promise.resolve(handler(payload, ctx)).then(then);
  } finally {
    if (fast === undefined && slot.fast) direct.set(handler, isNestEventHandler(handler) && slot.fast);
    slot.ctx = undefined;
    slot.fast = undefined;
  }
}

/**
 * Nest's RpcProxy over a chain of nothing: the handler's value awaited; a throw, a rejection or an
 * Observable's error handed to the exception handler, whose (erroring) Observable is then the value.
 */
function fastCall(
  creator: ContextCreator,
  instance: object,
  callback: Fn,
  args: (payload: unknown, ctx: unknown) => unknown[],
  exceptionHandler: unknown,
  report: boolean | undefined,
): FastCall {
  const { rpcProxy } = creator;
  const fail = (payload: unknown, ctx: unknown, error: unknown) => rpcProxy.handleError(exceptionHandler, [payload, ctx], error, report);
  const resolved = (payload: unknown, ctx: unknown, value: unknown) =>
    isObservable(value) ? value.pipe(catchError((error: unknown) => fail(payload, ctx, error))) : value;
  return function fastEventCall(payload, ctx, then) {
    let result: unknown;
    try {
      result = callback.apply(instance, args(payload, ctx));
    } catch (error) {
      const failed = fail(payload, ctx, error);
      return then ? Promise.resolve(failed).then(then) : failed;
    }
    if (isThenable(result)) {
      return Promise.resolve(result).then(
        (value) => (then ? then(resolved(payload, ctx, value)) : resolved(payload, ctx, value)),
        (error: unknown) => (then ? then(fail(payload, ctx, error)) : fail(payload, ctx, error)),
      );
    }
    const value = resolved(payload, ctx, result);
    return then ? Promise.resolve(value).then(then) : value;
  };
}

/**
 * How the fast proxy builds the handler's arguments from (payload, ctx), as Nest's pipes would with no
 * pipe; undefined when something runs between Nest's proxy and the handler (the full chain then).
 */
function argsOf(
  creator: ContextCreator,
  instance: object,
  callback: Fn,
  moduleKey: string,
  methodName: string,
  contextId: unknown,
  inquirerId: unknown,
  defaultCallMetadata: unknown,
): ((payload: unknown, ctx: unknown) => unknown[]) | undefined {
  // Request-scoped and durable handlers: Nest makes their proxy per request, with its context id.
  if ((contextId !== undefined && contextId !== STATIC_CONTEXT) || inquirerId !== undefined) return undefined;
  // Nest 12's create reads them from the ApplicationConfig (Nest 11's RpcContextCreator has none).
  const hooks = creator.applicationConfig ? creator.applicationConfig.getGlobalPreRequestHooks?.() : [];
  if (!Array.isArray(hooks) || hooks.length > 0) return undefined;
  for (const enhancers of [creator.guardsContextCreator, creator.interceptorsContextCreator, creator.pipesContextCreator]) {
    const bound = enhancers.create(instance, callback, moduleKey, contextId, inquirerId);
    if (!Array.isArray(bound) || bound.length > 0) return undefined;
  }
  const { argsLength, getParamsMetadata } = creator.getMetadata(instance, methodName, defaultCallMetadata, 'rpc');
  const params = getParamsMetadata(moduleKey);
  // No parameter metadata at all: Nest calls the handler with the proxy's own arguments.
  if (params.length === 0) return (payload, ctx) => [payload, ctx];
  const slots: (typeof PAYLOAD | typeof CONTEXT | undefined)[] = new Array<undefined>(argsLength).fill(undefined);
  for (const { index, type, data, pipes } of params) {
    // A custom decorator (its type is a string), @Payload('field'), a parameter pipe: the full chain.
    if ((type !== PAYLOAD && type !== CONTEXT) || data !== undefined || pipes.length > 0) return undefined;
    if (!Number.isInteger(index) || index < 0 || index >= argsLength) return undefined;
    slots[index] = type;
  }
  if (argsLength === 1 && slots[0] === PAYLOAD) return (payload) => [payload];
  if (argsLength === 2 && slots[0] === PAYLOAD && slots[1] === CONTEXT) return (payload, ctx) => [payload, ctx];
  return (payload, ctx) => slots.map((s) => (s === PAYLOAD ? payload : s === CONTEXT ? ctx : undefined));
}

/** Whether `creator` and the Nest code the fast proxy stands in for are what it was checked against. */
function isCheckedChain(creator: ContextCreator, create: Fn): boolean {
  try {
    if (Object.keys(creator).some((field) => !KNOWN_FIELDS.has(field))) return false;
    return CHECKED_CHAIN_CODE.has(fingerprint(chainCode(creator, create)));
  } catch {
    return false;
  }
}

/** The Nest functions the fast proxy stands in for, in the order their fingerprint is taken. */
function chainCode(c: ContextCreator, create: unknown): unknown[] {
  const proto = Object.getPrototypeOf(c) as Record<string, unknown>;
  return [
    create,
    proto.getMetadata,
    proto.exchangeKeysForValues,
    proto.createPipesFn,
    proto.getParamValue,
    proto.createGuardsFn,
    c.rpcProxy.create,
    c.rpcProxy.handleError,
    c.interceptorsConsumer.intercept,
    c.rpcParamsFactory.exchangeKeyForValue,
  ];
}

/** Whether `handler` is Nest's own eventHandler of a static controller (it only calls its proxy when nothing is chained). */
function isNestEventHandler(handler: Fn): boolean {
  try {
    return CHECKED_EVENT_HANDLER_CODE.has(fingerprint(eventHandlerCode(handler)));
  } catch {
    return false;
  }
}

/** The code a direct call of the FastCall stands in for, in the order its fingerprint is taken. */
function eventHandlerCode(handler: unknown): unknown[] {
  return [handler, (ListenersController.prototype as unknown as Record<string, unknown>).forkJoinHandlersIfAttached];
}

/**
 * For the test that reviews a Nest version (test/nest-fast-path.spec.ts): the fingerprints of the chain
 * of Nest's RpcContextCreator `creator` and of the event handler `handler`, and whether they are checked ones.
 */
export function nestCodeReview(creator: object, handler: unknown): { chain: string; eventHandler: string; checked: [boolean, boolean] } {
  const create = (RpcContextCreator.prototype as unknown as Record<symbol, unknown>)[NEST_CREATE];
  const chain = fingerprint(chainCode(creator as ContextCreator, create));
  const eventHandler = fingerprint(eventHandlerCode(handler));
  return { chain, eventHandler, checked: [CHECKED_CHAIN_CODE.has(chain), CHECKED_EVENT_HANDLER_CODE.has(eventHandler)] };
}

/** SHA-256 of functions' source, whitespace aside; a missing function fails it. */
function fingerprint(code: readonly unknown[]): string {
  const hash = createHash('sha256');
  for (const fn of code) {
    if (typeof fn !== 'function') throw new TypeError('not a function');
    hash.update(Function.prototype.toString.call(fn).replace(/\s+/g, '')).update('\0');
  }
  return hash.digest('hex');
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'
  );
}
