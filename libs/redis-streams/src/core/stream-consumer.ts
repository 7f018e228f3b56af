import type { Cluster, Redis } from 'ioredis';
import type { Observable } from 'rxjs';
import type { RedisStreamsEvents } from '../engine/events.js';
import { planStreams, type Registration } from '../engine/plan.js';
import { StreamEngine } from '../engine/stream-engine.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { isCluster } from '../options/connection.js';
import type { StreamBatchOptions } from '../options/batch-options.js';
import type { StreamPatternExtras } from '../options/pattern-options.js';
import { resolveServerOptions, type RedisStreamsServerOptions, type ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import { InvalidOptionError, shown } from '../options/validate.js';
import type { RedisStreamsStatus } from '../status.js';
import { AbortWatch } from './abort-watch.js';
import { consoleLogger, silentLogger } from './console-logger.js';
import { guardLogger } from '../guarded-logger.js';
import { RegisteredHandlers, type StreamBatchHandler, type StreamHandler } from './registered-handlers.js';

/** The server options of `RedisStreamsServer` (same names, defaults and checks), and what a plain Node host adds. */
export interface StreamConsumerOptions extends RedisStreamsServerOptions {
  /** Where the consumer logs (`log`, `warn`, `error(message, stack?)`; a Nest logger fits). Default: the console, lines prefixed `[nestjs-redis-streams]`; `false`: nowhere. */
  logger?: Logger | false;
  /**
   * Aborting it calls `close()`; aborted while `close()` already waits on handlers, it ends that
   * wait (the entries in hand stay pending), as a second SIGTERM does for a Nest app. Default: none.
   */
  signal?: AbortSignal;
}

/** `handle`'s extras for a batch handler: `batch` is required there. */
export type StreamBatchExtras = StreamPatternExtras & { batch: StreamBatchOptions };

/** The host's own options: a logger with its three methods (or false), an AbortSignal. */
function checkHostOptions(logger: unknown, signal: unknown): void {
  const methods = ['log', 'warn', 'error'];
  if (logger !== undefined && logger !== false) {
    const expected = 'expected false or an object with log, warn and error methods';
    if ((typeof logger !== 'object' && typeof logger !== 'function') || logger === null)
      throw new InvalidOptionError('logger', `${expected}, got ${shown(logger)}`);
    const missing = methods.filter((m) => typeof (logger as Record<string, unknown>)[m] !== 'function');
    if (missing.length > 0) throw new InvalidOptionError('logger', `${expected} (missing: ${missing.join(', ')})`);
  }
  if (signal !== undefined) {
    const s = signal as { aborted?: unknown; addEventListener?: unknown } | null;
    if (typeof s !== 'object' || s === null || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function')
      throw new InvalidOptionError('signal', "expected an AbortSignal (an AbortController's signal)");
  }
}

/** How the plan's errors name a registration: `handle('orders', handler, { partitions: 4 })`. */
const coreRegistration: Registration = (pattern, extras) => `handle('${pattern}'${extras ? `, handler, ${extras}` : ''})`;

/**
 * The consumer of one Redis Stream consumer group without Nest: the same engine, options,
 * guarantees and events as `RedisStreamsServer` (self-drain on restart, reclaim after
 * `minIdleMs`, retries, dead letters, stop at settle points). Register handlers with
 * `handle`, then `start()`; `close()` is terminal.
 *
 * It handles no process signal: wire SIGTERM to `close()` yourself (docs/guide/plain-node.md).
 */
export class StreamConsumer {
  readonly options: Readonly<ResolvedServerOptions>;
  private readonly logger: Logger;
  private readonly handlers: RegisteredHandlers;
  private readonly engine: StreamEngine;
  private readonly abort: AbortWatch;
  private starting: Promise<void> | undefined;

  constructor(options: StreamConsumerOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new InvalidOptionError('options', 'expected an object');
    const { logger, signal, ...serverOptions } = options;
    checkHostOptions(logger, signal);
    this.options = resolveServerOptions(serverOptions);
    // A logger that throws costs the line, never the step (guarded-logger.ts).
    this.logger = guardLogger(logger === false ? silentLogger : (logger ?? consoleLogger));
    this.handlers = new RegisteredHandlers(this.options);
    this.abort = new AbortWatch(signal, () => this.close());
    this.engine = new StreamEngine(this.options, this.handlers, this.logger, this.abort.interrupt);
  }

  /** Connection states, then `closing` and `closed`. */
  get status(): Observable<RedisStreamsStatus> {
    return this.engine.status$;
  }

  /**
   * Makes `stream` (plus `keyPrefix`) a stream this consumer reads, with `handler` for its entries.
   * The extras are `@StreamPattern`'s: `partitions`, `retry`, and `batch` (then the handler gets
   * the entries and a batch context). One handler per stream; every one before `start()`.
   */
  handle<T = any>(stream: string, handler: StreamBatchHandler<T>, extras: StreamBatchExtras): this;
  handle<T = any>(stream: string, handler: StreamHandler<T>, extras?: StreamPatternExtras & { batch?: undefined }): this;
  handle(stream: string, handler: (...args: any[]) => unknown, extras: StreamPatternExtras = {}): this {
    if (this.starting) throw new Error(`nestjs-redis-streams: handle('${stream}') after start(): register every handler before start()`);
    if (typeof extras !== 'object' || extras === null)
      throw new InvalidOptionError(
        `handle('${String(stream)}') extras`,
        `expected an object ({ batch, retry, partitions, ordered }), got ${shown(extras)}`,
      );
    this.handlers.add(stream, handler, extras);
    return this;
  }

  /**
   * Resolves once every stream's group exists (created when missing) and the consumer reads;
   * rejects, scrubbed of secrets, with what kept it from starting (after `startupTimeoutMs`
   * when Redis does not answer), or with what no handler could ever be read as. Once only.
   */
  start(): Promise<void> {
    return (this.starting ??= this.begin());
  }

  private begin(): Promise<void> {
    if (this.abort.abortedAlready) void this.close();
    let plan: ReturnType<typeof planStreams>;
    try {
      plan = planStreams(this.handlers.infos(), {
        keyPrefix: this.options.keyPrefix,
        deadLetterStream: this.options.deadLetterStream,
        onCluster: isCluster(this.options.connection),
        durableAcks: this.options.durableAcks,
        leaseRenewMs: this.options.leaseRenewMs,
        registration: coreRegistration,
      });
    } catch (err) {
      return Promise.reject(err);
    }
    if (plan.streams.length === 0) {
      this.logger.warn('no handle(...) call before start(): this consumer reads no stream');
      return Promise.resolve();
    }
    return this.engine.start(plan);
  }

  /**
   * Stops taking entries, lets the entries in hand finish and be settled (at most
   * `shutdownTimeoutMs`, or until `signal` aborts; then they are abandoned, left pending), hands
   * the rest of a fetched batch back to the group, and closes every connection. Terminal.
   */
  close(): Promise<void> {
    this.abort.closing();
    return this.engine.close().finally(() => this.abort.dispose());
  }

  /** See `RedisStreamsServer.health`: the figures a liveness or readiness check decides on. */
  health(options: { maxStatsAgeMs?: number; stats?: boolean } = {}): Promise<RedisStreamsHealth> {
    return this.engine.health(options);
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
    if (!connections) throw new Error('nestjs-redis-streams: not started: call start() before unwrap()');
    return connections as T;
  }
}
