import { Logger } from '@nestjs/common';
import { CustomTransportStrategy, Server, type MessageHandler } from '@nestjs/microservices';
import type { Cluster, Redis } from 'ioredis';
import type { RedisStreamsEvents } from '../engine/events.js';
import { nestRegistration, planStreams, type HandlerInfo } from '../engine/plan.js';
import { StreamEngine } from '../engine/stream-engine.js';
import { guardLogger } from '../guarded-logger.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { isCluster } from '../options/connection.js';
import { resolveServerOptions, type RedisStreamsServerOptions, type ResolvedServerOptions } from '../options/server-options.js';
import type { RedisStreamsStatus } from '../status.js';
import { REDIS_STREAMS_TRANSPORT } from '../transport.js';
import { watchSignals } from './second-signal.js';
import { warnIfSigtermUnhandled } from './signal-check.js';
import { NestDispatch, propagateEventHandlerErrors } from './nest-dispatch.js';

/** Nest's handler registry as plain data: per pattern, the extras of every handler chained on it. */
function handlersOf(messageHandlers: Map<string, MessageHandler>): HandlerInfo[] {
  return [...messageHandlers].map(([pattern, head]) => {
    const chain: Record<string, unknown>[] = [];
    for (let h: MessageHandler | undefined = head; h; h = h.next as MessageHandler | undefined) chain.push(h.extras ?? {});
    return { pattern, isEventHandler: head.isEventHandler === true, chain };
  });
}

/**
 * Nest transport strategy over one Redis Stream consumer group. Every `@EventPattern(key)`
 * and `@MessagePattern(key)` handler makes `key` (plus `keyPrefix`) a stream this server's
 * consumer reads.
 *
 * `close()` stops taking entries, lets the entry in hand finish and be settled, hands the
 * rest of its batch back to the group, then closes its connections.
 *
 * On a Redis Cluster it runs one reader per hash slot its streams use (streams sharing a hash
 * tag share one): each parks on its slot's master, so no command ever spans slots.
 */
export class RedisStreamsServer extends Server<RedisStreamsEvents, RedisStreamsStatus> implements CustomTransportStrategy {
  override readonly transportId = REDIS_STREAMS_TRANSPORT;
  protected override readonly logger = new Logger(RedisStreamsServer.name);
  /** The transport's own lines: an app logger that throws costs the line, never the step (guarded-logger.ts). */
  private readonly lines = guardLogger(this.logger);
  readonly options: Readonly<ResolvedServerOptions>;
  private readonly engine: StreamEngine;

  constructor(options: RedisStreamsServerOptions = {}) {
    super();
    propagateEventHandlerErrors(this);
    this.options = resolveServerOptions(options);
    const { serializer, replyTtlMs } = this.options;
    const dispatch = new NestDispatch(this, { serializer, replyTtlMs, logger: this.lines });
    // Nest's shutdown hooks take the first SIGTERM; a second one ends close()'s wait (today's behaviour).
    this.engine = new StreamEngine(this.options, dispatch, this.lines, watchSignals);
    this.engine.status$.subscribe((status) => this._status$.next(status));
  }

  listen(callback: (err?: unknown, ...optionalParams: unknown[]) => void): void {
    let plan: ReturnType<typeof planStreams>;
    try {
      plan = planStreams(handlersOf(this.messageHandlers), {
        keyPrefix: this.options.keyPrefix,
        deadLetterStream: this.options.deadLetterStream,
        onCluster: isCluster(this.options.connection),
        durableAcks: this.options.durableAcks,
        leaseRenewMs: this.options.leaseRenewMs,
        registration: nestRegistration,
      });
    } catch (err) {
      return callback(err);
    }
    if (plan.streams.length === 0) {
      this.lines.warn('no @EventPattern or @MessagePattern handlers: this consumer reads no stream');
      return callback();
    }
    this.engine.start(plan).then(() => {
      callback();
      warnIfSigtermUnhandled(this.lines);
    }, callback);
  }

  /**
   * The figures a health check decides on: whether the loops can talk to Redis, and per stream
   * the group's lag and pending count (XINFO GROUPS, read at most every `maxStatsAgeMs`, default
   * 1000; `stats: false` skips them, as liveness does) and this consumer's entries in hand.
   * Answers within about a second even when Redis does not: with the last figures it has, and
   * `statsError` saying why.
   */
  health(options: { maxStatsAgeMs?: number; stats?: boolean } = {}): Promise<RedisStreamsHealth> {
    return this.engine.health(options);
  }

  /**
   * Resolves once the entry in hand is settled (or abandoned after `shutdownTimeoutMs`) and
   * every connection is closed. Terminal: nothing of the transport runs after it.
   */
  close(): Promise<void> {
    return this.engine.close();
  }

  /**
   * Pauses `pattern` for the whole group at run time: every worker finishes what it holds and reads
   * nothing new of it (this one at once, the others within `flowCheckMs`); workers started meanwhile
   * stay paused, and all stay live and ready. Resolves true if it was running. Also: the CLI's
   * `redis-streams pause`, the dashboard. See docs/guide/flow-control.md.
   */
  pause(pattern: string): Promise<boolean> {
    return this.engine.pause(pattern);
  }

  /** Resumes `pattern` for the whole group (see `pause`): true if it was paused. */
  resume(pattern: string): Promise<boolean> {
    return this.engine.resume(pattern);
  }

  on<K extends keyof RedisStreamsEvents>(event: K, callback: RedisStreamsEvents[K]): this {
    this.engine.on(event, callback);
    return this;
  }

  /** `[command, blocking]` ioredis connections; on a cluster `[Cluster, blocking of each slot reader…]`. */
  unwrap<T = [Redis | Cluster, ...Redis[]]>(): T {
    const connections = this.engine.connections();
    if (!connections) {
      throw new Error('Not initialized. Please call the "listen"/"startAllMicroservices" method before accessing the server.');
    }
    return connections as T;
  }
}
