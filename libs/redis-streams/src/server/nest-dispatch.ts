import type { BaseRpcContext, MessageHandler } from '@nestjs/microservices';
import { isObservable, lastValueFrom, throwError, type Observable } from 'rxjs';
import { RedisStreamsBatchContext, type StreamBatchEntry } from '../batch.js';
import { batchOutcome } from '../batch-failure-mark.js';
import type { DecodedEntry } from '../codec/entry-codec.js';
import { encodeReply, UnserializableResult } from '../codec/reply-codec.js';
import type { BatchItem } from '../consumer/settle/decide-batch.js';
import type { EntryContextArgs, RedisStreamsBatchContextArgs } from '../consumer/settle/entry-context.js';
import { RedisStreamsContext } from '../context.js';
import type { DispatchPort, ReplySender } from '../engine/dispatch-port.js';
import type { Logger, Serializer, WritePacket } from '../ports.js';
import { RedisWriteError } from '../redis/replies/redis-errors.js';
import { callEventHandler, installFastPath } from './nest-fast-path.js';
import { keepNestLogFor, originalError, rememberOriginalErrors } from './original-errors.js';
import { writeReplies } from './reply-writer.js';

// What Nest's other transports answer to a request without a handler.
const NO_MESSAGE_HANDLER = 'There is no matching message handler defined in the remote service.';

/** The members of Nest's `Server` the dispatch uses (protected there: this module is their one reader). */
interface NestServer {
  readonly transportId: symbol;
  readonly messageHandlers: Map<string, MessageHandler>;
  onProcessingStartHook: (transportId: symbol, context: BaseRpcContext, done: () => Promise<unknown>) => unknown;
  onProcessingEndHook: ((transportId: symbol, context: BaseRpcContext) => void) | undefined;
  transformToObservable(value: unknown): Observable<unknown>;
}

export interface NestDispatchOptions {
  serializer: Serializer;
  replyTtlMs: number;
  logger: Logger;
}

/**
 * Nest 12 swallows an event handler's error unless its transport says it reports them (as we
 * do: a failed entry stays pending). Nest 11 always propagated them and has no such field, so
 * it is set here rather than declared, which compiles against both.
 */
export function propagateEventHandlerErrors(server: object): void {
  (server as unknown as { propagatesEventHandlerErrors: boolean }).propagatesEventHandlerErrors = true;
}

/**
 * A handler's resolved result as a value: an Observable still has to complete (or error), and its
 * last value counts. Nest's RPC proxy hands a failure over as an erroring Observable, replaced by
 * its default filter: the handler's own error is put back (see original-errors.ts).
 */
function resultOf(value: unknown): unknown {
  return isObservable(value) ? lastValueFrom(value, { defaultValue: undefined }).catch(rethrowOriginal) : value;
}

function rethrowOriginal(err: unknown): never {
  throw originalError(err);
}

/** The one place that calls Nest handlers: contexts, processing hooks, request replies. */
export class NestDispatch implements DispatchPort {
  private readonly server: NestServer;
  private readonly defaultStartHook: NestServer['onProcessingStartHook'];

  /** Made in the server's constructor, before Nest can install its hooks. */
  constructor(
    server: object,
    private readonly options: NestDispatchOptions,
  ) {
    this.server = server as unknown as NestServer;
    this.defaultStartHook = this.server.onProcessingStartHook;
    rememberOriginalErrors();
    installFastPath();
  }

  /**
   * Events: the handler's result is awaited; a failure rejects (the entry stays pending).
   * Requests (`send`): the handler's values and errors (a value the serializer refuses is
   * one) are written to the caller's reply stream; only a reply Redis refused rejects.
   */
  dispatch(pattern: string, entry: DecodedEntry, args: EntryContextArgs, replies: ReplySender): Promise<unknown> {
    // Patterns are stream keys, already normalized: a direct lookup (Nest's getHandlerByPattern
    // first tries JSON.parse, which throws for every plain key: a quarter of the drain's CPU).
    const handler = this.server.messageHandlers.get(pattern);
    const ctx = new RedisStreamsContext(args);
    const { request } = entry;
    if (!request) {
      if (!handler) return Promise.reject(new Error(`no handler for pattern "${pattern}"`));
      // The hot path: no tracing hooks installed, so no wrapper, closure or async frame per entry;
      // and Nest's chain skipped when nothing is bound to the handler (nest-fast-path.ts).
      if (!this.hooksInstalled()) return callEventHandler(handler, entry.payload, ctx, resultOf);
      return this.runInHooks(ctx, () => callEventHandler(handler, entry.payload, ctx, resultOf));
    }
    const reply = async (packet: WritePacket) => {
      const fields = await encodeReply(request.correlationId, packet, this.options.serializer).catch((err: unknown) => {
        // writeReplies answers the caller with this error instead; the request is then acked.
        if (err instanceof UnserializableResult)
          this.options.logger.error(`request ${args.id} of "${args.stream}": ${err.message}; answered with an error`);
        throw err;
      });
      try {
        await replies.reply(request.replyTo, fields, this.options.replyTtlMs);
      } catch (err) {
        throw new RedisWriteError(`reply to "${request.replyTo}" for entry ${args.id} of "${args.stream}"`, err);
      }
    };
    if (!handler || handler.isEventHandler) return reply({ err: NO_MESSAGE_HANDLER, isDisposed: true });
    keepNestLogFor(ctx);
    return this.runInHooks(ctx, async () => writeReplies(await this.produce(handler, entry.payload, ctx), reply));
  }

  /**
   * A batch handler, called once with every entry. A BatchFailure, thrown or returned (untouched
   * by interceptors, it says the same), fails the entries it names; one that names no entry of
   * this call (an earlier call's, thrown again; an error a filter reshaped) fails them all.
   */
  async dispatchBatch(
    pattern: string,
    items: readonly BatchItem[],
    args: RedisStreamsBatchContextArgs,
  ): Promise<Map<number, unknown> | undefined> {
    const handler = this.server.messageHandlers.get(pattern);
    if (!handler) throw new Error(`no handler for pattern "${pattern}"`);
    const entries = items.map((item): StreamBatchEntry => ({ payload: item.payload, context: new RedisStreamsContext(item.args) }));
    const ctx = new RedisStreamsBatchContext(args);
    return batchOutcome(
      entries.map((e) => e.context),
      () => this.runInHooks(ctx, () => Promise.resolve(handler(entries, ctx)).then(resultOf)),
    );
  }

  /**
   * A request handler's values; Nest's RPC proxy already turned a throw into an erroring stream.
   * Its error reply keeps what Nest's filters made of it: the caller gets what Nest's other transports send.
   */
  private async produce(handler: MessageHandler, payload: unknown, ctx: RedisStreamsContext): Promise<Observable<unknown>> {
    try {
      return this.server.transformToObservable(await handler(payload, ctx));
    } catch (err) {
      return throwError(() => err);
    }
  }

  private hooksInstalled(): boolean {
    return this.server.onProcessingStartHook !== this.defaultStartHook || this.server.onProcessingEndHook !== undefined;
  }

  /** Runs `body` between Nest's processing start and end hooks (tracing); settles with `body`. */
  private runInHooks(ctx: BaseRpcContext, body: () => Promise<unknown>): Promise<unknown> {
    if (!this.hooksInstalled()) return body();
    const { server } = this;
    return new Promise<unknown>((resolve, reject) => {
      const started: unknown = server.onProcessingStartHook(server.transportId, ctx, async () => {
        try {
          resolve(await body());
        } catch (err) {
          reject(err);
        } finally {
          server.onProcessingEndHook?.(server.transportId, ctx);
        }
      });
      // A hook may return the promise of `done`; its failure is ours, not an unhandled rejection.
      if (started instanceof Promise) started.catch(reject);
    });
  }
}
