import { batchOutcome } from '../batch-failure-mark.js';
import type { DecodedEntry } from '../codec/entry-codec.js';
import { encodeReply } from '../codec/reply-codec.js';
import type { BatchItem } from '../consumer/settle/decide-batch.js';
import type { EntryContextArgs, RedisStreamsBatchContextArgs } from '../consumer/settle/entry-context.js';
import type { DispatchPort, ReplySender } from '../engine/dispatch-port.js';
import type { HandlerInfo } from '../engine/plan.js';
import { STREAM_PATTERN_EXTRAS, type StreamPatternExtras } from '../options/pattern-options.js';
import type { Serializer } from '../ports.js';
import { RedisWriteError } from '../redis/replies/redis-errors.js';
import type { BatchEntry } from './batch-failure-error.js';
import { StreamBatchContext, StreamContext } from './stream-context.js';

/** A handler of single entries: its result (or the promise's) settles the entry; a throw leaves it pending. */
export type StreamHandler<T = any> = (payload: T, context: StreamContext) => unknown;

/** A handler of `batch` streams: called once per batch; a `BatchFailureError` fails the entries it names. */
export type StreamBatchHandler<T = any> = (entries: BatchEntry<T>[], context: StreamBatchContext) => unknown;

// What Nest's transports answer to a request without a handler: a `client.send` caller is told at once.
const NO_MESSAGE_HANDLER = 'There is no matching message handler defined in the remote service.';

/** Calls a handler, a synchronous throw as a rejection. */
function call(run: () => unknown): Promise<unknown> {
  try {
    return Promise.resolve(run());
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * The handlers of a {@link StreamConsumer}, by pattern: the plan's input (as Nest's registry is
 * for the Nest adapter) and the engine's {@link DispatchPort}.
 */
export class RegisteredHandlers implements DispatchPort {
  private readonly handlers = new Map<string, { fn: (...args: any[]) => unknown; extras: StreamPatternExtras }>();

  constructor(private readonly replies: { serializer: Serializer<unknown, string>; replyTtlMs: number }) {}

  add(pattern: string, fn: (...args: any[]) => unknown, extras: StreamPatternExtras): void {
    if (typeof pattern !== 'string' || pattern === '')
      throw new TypeError(`nestjs-redis-streams: handle(stream, …): the stream must be a non-empty string`);
    if (typeof fn !== 'function')
      throw new TypeError(`nestjs-redis-streams: handle('${pattern}', handler): the handler must be a function`);
    if (this.handlers.has(pattern))
      throw new Error(`nestjs-redis-streams: handle('${pattern}') was called twice: one stream has one handler (do both things in it)`);
    this.handlers.set(pattern, { fn, extras });
  }

  /** Every handler as the plan reads it; its extras marked so a typo (`bach`) is refused. */
  infos(): HandlerInfo[] {
    return [...this.handlers].map(([pattern, { extras }]) => ({
      pattern,
      isEventHandler: true,
      chain: [{ ...extras, [STREAM_PATTERN_EXTRAS]: true }],
    }));
  }

  dispatch(pattern: string, entry: DecodedEntry, args: EntryContextArgs, replies: ReplySender): Promise<unknown> {
    const handler = this.handlers.get(pattern);
    // Request-response is Nest's (its ClientProxy waits for the reply): the caller is answered "no handler" at once.
    if (entry.request) return this.answerNoHandler(entry.request, args, replies);
    if (!handler) return Promise.reject(new Error(`no handler for pattern "${pattern}"`));
    // Per entry: the call itself, no closure around it (a synchronous throw is a rejection, as with call()).
    try {
      return Promise.resolve(handler.fn(entry.payload, new StreamContext(args)));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  dispatchBatch(
    pattern: string,
    items: readonly BatchItem[],
    args: RedisStreamsBatchContextArgs,
  ): Promise<Map<number, unknown> | undefined> {
    const handler = this.handlers.get(pattern);
    if (!handler) return Promise.reject(new Error(`no handler for pattern "${pattern}"`));
    const entries = items.map((item): BatchEntry => ({ payload: item.payload, context: new StreamContext(item.args) }));
    return batchOutcome(
      entries.map((e) => e.context),
      () => call(() => handler.fn(entries, new StreamBatchContext(args))),
    );
  }

  private async answerNoHandler(
    request: NonNullable<DecodedEntry['request']>,
    args: EntryContextArgs,
    replies: ReplySender,
  ): Promise<void> {
    const fields = await encodeReply(request.correlationId, { err: NO_MESSAGE_HANDLER, isDisposed: true }, this.replies.serializer);
    try {
      await replies.reply(request.replyTo, fields, this.replies.replyTtlMs);
    } catch (err) {
      throw new RedisWriteError(`reply to "${request.replyTo}" for entry ${args.id} of "${args.stream}"`, err);
    }
  }
}
