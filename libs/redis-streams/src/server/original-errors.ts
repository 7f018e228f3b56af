import { BaseRpcExceptionFilter, RpcException } from '@nestjs/microservices';
import { catchError, throwError, type Observable } from 'rxjs';
import { brandMark } from '../brand.js';
import { describeHandlerError, handlerStack } from '../describe-error.js';
import { lineLost } from '../guarded-logger.js';

/*
 * Nest's default RPC exception filter hands a transport `{ status, message: 'Internal server
 * error' }` for anything but an RpcException (and an RpcException's bare error object): the
 * handler's own error is gone before the transport sees it. A transport cannot register a filter
 * of its own without the user's code (global filters live in the app's config), and wrapping the
 * handler is too late (Nest gives `addHandler` the callback already wrapped by its RpcProxy). So
 * the default filter's `catch` is hooked, once per process, to remember which original each
 * replacement stands for; only for calls whose context is this transport's, and without changing
 * what the filter returns. User filters run before it and are untouched: what one returns of its
 * own is what the transport reports; one that delegates to the default gets the original back.
 * A WeakMap keyed by the replacement needs no async context and costs nothing when nothing fails.
 */

const HOOKED = Symbol.for('nestjs-redis-streams/default-rpc-filter-hooked');
const ORIGINALS = Symbol.for('nestjs-redis-streams/rpc-error-originals');
// On globalThis under a global symbol: the package's two builds share one map, and one hook.
const originals: WeakMap<object, unknown> = ((globalThis as Record<symbol, unknown>)[ORIGINALS] ??= new WeakMap()) as WeakMap<
  object,
  unknown
>;
const OUR_CONTEXTS = [brandMark('RedisStreamsContext'), brandMark('RedisStreamsBatchContext')];
/**
 * Contexts of requests: the transport answers a failed request and logs nothing, so Nest's line stays. Shared by
 * both builds as `originals` is: the hook is the first build's, the request may be the other's (review-b).
 */
const REQUESTS = Symbol.for('nestjs-redis-streams/rpc-request-contexts');
const requests: WeakSet<object> = ((globalThis as Record<symbol, unknown>)[REQUESTS] ??= new WeakSet()) as WeakSet<object>;
/** What Nest's default filter answers for anything but an RpcException (its MESSAGES.UNKNOWN_EXCEPTION_MESSAGE). */
const UNKNOWN = 'Internal server error';

type Catch = (this: unknown, exception: unknown, host: { getArgByIndex(i: number): unknown }) => Observable<unknown>;

/** Installs the hook on Nest's default RPC exception filter (idempotent). */
export function rememberOriginalErrors(): void {
  const proto = BaseRpcExceptionFilter.prototype as unknown as Record<PropertyKey, unknown> & { catch: Catch };
  if (proto[HOOKED]) return;
  const replace = proto.catch;
  Object.defineProperty(proto, HOOKED, { value: true });
  const protoUnknown = proto as unknown as { handleUnknownError: HandleUnknown };
  const logsUnknown = guardedUnknownError(protoUnknown.handleUnknownError);
  protoUnknown.handleUnknownError = logsUnknown;
  proto.catch = function (this: unknown, exception, host) {
    // An event's or a batch's failure: the transport logs it itself (masked, escaped, with the
    // stack), so Nest's line would say it twice, raw. A subclass with its own handleUnknownError
    // (the user's logging) is left to it.
    if (isOurs(host) && !requests.has(host.getArgByIndex(1) as object) && !(exception instanceof RpcException)) {
      if ((this as { handleUnknownError?: unknown }).handleUnknownError === logsUnknown) {
        const replacement = { status: 'error', message: UNKNOWN };
        originals.set(replacement, exception);
        return throwError(() => replacement);
      }
    }
    if (!isOurs(host)) return replace.call(this, exception, host);
    // Nest's logging of this call (below) must not throw into the caller's reply: see guardedUnknownError.
    ourCalls++;
    let replaced$: Observable<unknown>;
    try {
      replaced$ = replace.call(this, exception, host);
    } finally {
      ourCalls--;
    }
    return replaced$.pipe(
      catchError((replacement: unknown) => {
        if (typeof replacement === 'object' && replacement !== null && replacement !== exception) originals.set(replacement, exception);
        return throwError(() => replacement);
      }),
    );
  };
}

type HandleUnknown = (this: unknown, exception: unknown, status: string) => Observable<unknown>;

/** Calls of this transport's inside the default filter's `catch` (synchronous: a count, no async context). */
let ourCalls = 0;

/**
 * Nest's handleUnknownError logs the failure through the app's logger; a logger that throws there would make Nest
 * send the caller the logger's error instead of its reply (review-z F2). For this transport's calls (also through a
 * subclass that calls it), the line goes to stderr and the answer is Nest's. Nothing else in it throws.
 */
function guardedUnknownError(logsUnknown: HandleUnknown): HandleUnknown {
  return function (this: unknown, exception, status) {
    if (ourCalls === 0) return logsUnknown.call(this, exception, status);
    try {
      return logsUnknown.call(this, exception, status);
    } catch (thrown) {
      // The logger may quote the raw error it was handed: its commands' passwords are masked there too.
      lineLost(lineOf(exception), framesOf(exception), thrown, exception);
      return throwError(() => ({ status, message: UNKNOWN }));
    }
  };
}

/** Nest's line for the failure, as the library would write it; never a throw of its own (a getter that throws). */
function lineOf(exception: unknown): string {
  try {
    return `[RpcExceptionsHandler] ${describeHandlerError(exception)}`;
  } catch {
    return '[RpcExceptionsHandler] (a failure that could not be described)';
  }
}

/** The failure's stack frames (its header is the line already), or none. */
function framesOf(exception: unknown): string | undefined {
  try {
    return handlerStack(exception)?.split('\n').slice(1).join('\n') || undefined;
  } catch {
    return undefined;
  }
}

/** What the handler threw, when `err` is the default filter's replacement of it; `err` itself otherwise. */
export function originalError(err: unknown): unknown {
  return typeof err === 'object' && err !== null && originals.has(err) ? originals.get(err) : err;
}

function isOurs(host: { getArgByIndex(i: number): unknown } | undefined): boolean {
  const ctx = host?.getArgByIndex?.(1);
  return typeof ctx === 'object' && ctx !== null && OUR_CONTEXTS.some((mark) => (ctx as Record<symbol, unknown>)[mark] === true);
}

/** Marks a request's context: its failure keeps Nest's own log line (see `requests`). */
export function keepNestLogFor(ctx: object): void {
  requests.add(ctx);
}
