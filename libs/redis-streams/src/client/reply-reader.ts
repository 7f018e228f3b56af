import type { LoggerService } from '@nestjs/common';
import type { Deserializer, WritePacket } from '@nestjs/microservices';
import { concatMap, defer, EMPTY, of, repeat, retry, timer, type Subscription } from 'rxjs';
import { backoffMs } from '../backoff.js';
import { decodeReply } from '../codec/reply-codec.js';
import type { Lanes } from '../redis/connection/lanes.js';
import type { ProducerCommands } from '../redis/produce/producer-commands.js';
import type { StreamEntry } from '../stream-entry.js';
import { within } from '../within.js';
import { describeError } from '../describe-error.js';
import { SERVER_DEFAULTS } from '../options/server-options.js';

/** Most replies taken per read. */
const REPLY_BATCH = 100;
/** How long `close()` tries to delete the reply stream. */
const DROP_TIMEOUT_MS = 1000;

export interface ReplyReaderDeps {
  lanes: Lanes;
  commands: ProducerCommands;
  /** This client's reply stream: one reader, so a plain XREAD (no group). */
  key: string;
  blockMs: number;
  ttlMs: number;
  deserializer: Deserializer<string, unknown>;
  logger: LoggerService;
  /** A failure the client's connection report tells already (the connection is down): not logged again here. */
  toldElsewhere?: (err: unknown) => boolean;
  /**
   * Starts the read loop outside the caller's trace context: the first `send` starts it, and
   * every read for the client's lifetime would otherwise count as part of that one request.
   */
  detached?: <T>(start: () => T) => T;
}

/**
 * Reads the client's reply stream on the blocking lane and hands each reply to the request
 * waiting for it. Started by the first `send`; every beat renews the stream's TTL, so the
 * stream outlives the client by `ttlMs` at most.
 */
export class ReplyReader {
  private readonly waiting = new Map<string, (packet: WritePacket) => void>();
  private loop: Subscription | undefined;
  private afterId = '0-0';
  private closed = false;

  constructor(private readonly d: ReplyReaderDeps) {}

  /** Routes replies for `correlationId` to `callback` until the last one; returns the unregister function. */
  register(correlationId: string, callback: (packet: WritePacket) => void): () => void {
    if (this.closed) {
      callback({ err: new Error('nestjs-redis-streams: the client is closed'), isDisposed: true });
      return () => {};
    }
    this.waiting.set(correlationId, callback);
    this.loop ??= this.d.detached ? this.d.detached(() => this.run()) : this.run();
    return () => this.waiting.delete(correlationId);
  }

  get pending(): number {
    return this.waiting.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.loop?.unsubscribe();
    await this.d.lanes.unblock();
    for (const callback of this.waiting.values())
      callback({ err: new Error('nestjs-redis-streams: the client was closed before the reply arrived'), isDisposed: true });
    this.waiting.clear();
    // Best effort: when Redis is unreachable the stream's TTL removes it instead.
    if (this.d.lanes.command.status === 'ready')
      await within(
        this.d.commands.drop(this.d.key).catch(() => {}),
        DROP_TIMEOUT_MS,
        undefined,
      );
  }

  private run(): Subscription {
    // The consumer loop's default backoff (the client has no retry options of its own).
    const { retryInitialDelayMs, retryMaxDelayMs } = SERVER_DEFAULTS;
    return defer(() => this.read())
      .pipe(
        concatMap((entries) => this.route(entries)),
        repeat({ delay: () => (this.closed ? EMPTY : of(0)) }),
        retry({
          resetOnSuccess: true,
          delay: (err: unknown, attempt: number) => {
            if (this.closed) return EMPTY;
            if (!this.d.toldElsewhere?.(err)) this.d.logger.warn(`reply reader of "${this.d.key}": ${describeError(err)}; retrying`);
            return timer(backoffMs(attempt, retryInitialDelayMs, retryMaxDelayMs));
          },
        }),
      )
      .subscribe();
  }

  private async read(): Promise<StreamEntry[]> {
    if (!(await this.d.lanes.prepareBlocking(this.d.blockMs))) return [];
    return this.d.lanes.awaitPark(
      this.d.commands.readReplies(this.d.lanes.blocking, this.d.key, this.afterId, REPLY_BATCH, this.d.blockMs),
      this.d.blockMs,
    );
  }

  private async route(entries: StreamEntry[]): Promise<void> {
    for (const entry of entries) {
      this.afterId = entry.id;
      const reply = await decodeReply(entry.fields, this.d.deserializer);
      if (!reply) continue;
      // No one waiting: the caller gave up (timeout, unsubscribe) or this is a re-run's duplicate.
      const callback = this.waiting.get(reply.correlationId);
      if (reply.packet.isDisposed) this.waiting.delete(reply.correlationId);
      callback?.(reply.packet);
    }
    await this.d.commands.consumed(
      this.d.key,
      entries.map((e) => e.id),
      this.d.ttlMs,
    );
  }
}
