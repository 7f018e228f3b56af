import { createConnection } from 'node:net';
import { Cluster, Redis, type ClusterNode, type ClusterOptions, type Command, type RedisOptions } from 'ioredis';
import { isCluster, type ResolvedConnection } from '../../options/connection.js';
import { within } from '../../within.js';

/** What the command lane talks through: one node, or ioredis' Cluster (which follows MOVED/ASK itself). */
export type RedisConnection = Redis | Cluster;

/**
 * The command lane: every non-blocking command. `commandTimeoutMs` is each command's deadline
 * (see Lanes). On a cluster, one ioredis Cluster serves every slot reader of a consumer.
 */
export function openCommandConnection(connection: ResolvedConnection, name: string, commandTimeoutMs?: number): RedisConnection {
  const lane = (node: RedisOptions): RedisOptions => ({
    ...node,
    connectionName: name,
    // The loop retries with its own backoff; commands must not wait in ioredis forever.
    maxRetriesPerRequest: node.maxRetriesPerRequest ?? 1,
    ...(commandTimeoutMs !== undefined ? { commandTimeout: node.commandTimeout ?? commandTimeoutMs } : {}),
  });
  if (!isCluster(connection)) return new Redis(lane(connection));
  const options = { ...connection.options, redisOptions: lane(connection.options.redisOptions ?? {}) };
  if (commandTimeoutMs === undefined) return new SocketCauseCluster(connection.cluster, options);
  return new DeadlineCluster(
    connection.cluster,
    { ...options, maxRedirections: options.maxRedirections ?? redirectionsWithin(commandTimeoutMs, options) },
    commandTimeoutMs,
  );
}

/** ioredis' defaults: 16 redirections; 100 ms before a retry after CLUSTERDOWN, TRYAGAIN or a closed connection. */
const IOREDIS_MAX_REDIRECTIONS = 16;
const IOREDIS_RETRY_DELAY_MS = 100;

/**
 * Enough redirections for a command to be retried until its deadline, not 16 (about 1.6 s): while a dead master's
 * replica takes over (seconds), ioredis retries each command every 100 ms and counts every retry, and the other
 * nodes' MOVED to the dead master, followed at once, counts one more. A user's `maxRedirections` is kept.
 */
function redirectionsWithin(deadlineMs: number, options: ClusterOptions): number {
  const delays = [options.retryDelayOnClusterDown, options.retryDelayOnTryAgain, options.retryDelayOnFailover].map(
    (ms) => ms ?? IOREDIS_RETRY_DELAY_MS,
  );
  // A delay of 0 turns that retry off in ioredis: it does not count.
  const stepMs = Math.min(...delays.map((ms) => (ms > 0 ? ms : IOREDIS_RETRY_DELAY_MS)));
  return IOREDIS_MAX_REDIRECTIONS + 2 * Math.ceil(deadlineMs / stepMs);
}

/**
 * An ioredis Cluster whose failure to reach its nodes says why. When a seed refuses the connection (a wrong port, a
 * node down), ioredis asks it for the slots on a connection of its own whose socket error it drops, and reports only
 * "Failed to refresh slots cache." with "Connection is closed.". That node is then tried once with a plain TCP
 * connect (at most one at a time, within a second), and its socket error (ECONNREFUSED, a timeout) is attached to
 * the cluster's next errors instead: the worker's start and the producer's emits name the cause as on one node.
 */
class SocketCauseCluster extends Cluster {
  /** A node's socket error found by the last probe; undefined once the node accepted, the cluster is ready or read a slot map. */
  private socketError: Error | undefined;
  private probing = false;

  constructor(nodes: ClusterNode[], options: ClusterOptions) {
    // ioredis 6 types the options by reply mapping; ours are the legacy (RESP2) kind.
    super(nodes, options as never);
    this.on('node error', (err: unknown, key: unknown) => {
      if (err instanceof Error && err.message === CONNECTION_CLOSED && typeof key === 'string') this.probe(key);
    });
    // Ready, or a slot map read since: what a node's socket said then no longer explains anything.
    this.on('ready', () => (this.socketError = undefined));
    this.on('refresh', () => (this.socketError = undefined));
  }

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'error' && this.socketError) {
      const failure = args[0] as { lastNodeError?: unknown } | undefined;
      if (failure?.lastNodeError instanceof Error && failure.lastNodeError.message === CONNECTION_CLOSED)
        failure.lastNodeError = this.socketError;
    }
    return super.emit(event, ...args);
  }

  /** Connects to `key` (host:port, as ioredis names a node) and keeps what the socket says. */
  private probe(key: string): void {
    const at = key.lastIndexOf(':');
    const port = Number(key.slice(at + 1));
    if (this.probing || at < 1 || !Number.isInteger(port)) return;
    this.probing = true;
    const socket = createConnection({ host: key.slice(0, at), port });
    // A diagnosis only: it never keeps a process alive.
    socket.unref();
    const done = (err: Error | undefined) => {
      socket.destroy();
      socket.removeAllListeners();
      // An error listener stays: a socket error after this must not become an uncaught exception.
      socket.on('error', () => undefined);
      this.socketError = err;
      this.probing = false;
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(new Error(`connect ETIMEDOUT ${key} (no answer within ${PROBE_TIMEOUT_MS} ms)`)));
    socket.once('connect', () => done(undefined));
    socket.once('error', (err) => done(err));
  }
}

/** How long the probe of a node that closed the slot query's connection waits for TCP. */
const PROBE_TIMEOUT_MS = 1000;

/** ioredis' message for a command whose connection closed (utils' CONNECTION_CLOSED_ERROR_MSG). */
const CONNECTION_CLOSED = 'Connection is closed.';

/** The error replies ioredis' Cluster follows or retries (see Cluster.handleError). */
const RETRIED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /;

/** How often timed-out commands may ask for a fresh slot map (each asks the nodes in turn, one second each at most). */
const REFRESH_AFTER_TIMEOUT_EVERY_MS = 1000;

/**
 * An ioredis Cluster whose every command has a deadline, even where the nodes' `commandTimeout`
 * never starts: a command waiting in the Cluster's own offline queue (no slot map yet, a
 * failover), and a pipeline or MULTI, which waits for the slot map with no deadline at all,
 * forever once the Cluster has ended.
 */
class DeadlineCluster extends SocketCauseCluster {
  /** When a timed-out command last asked for a fresh slot map (performance.now()). */
  private refreshedAt = -Infinity;
  /** Commands whose caller was told they timed out: never sent (again) after that. */
  private readonly timedOut = new WeakSet<Command>();
  /**
   * Each command's deadline (performance.now()), from its first send: ioredis re-sends a pipeline's commands after a
   * redirection with fresh promises, which would otherwise get a fresh commandTimeoutMs each time.
   */
  private readonly deadlineAt = new WeakMap<Command, number>();
  /** The last error each command was retried after (CLUSTERDOWN, MOVED, TRYAGAIN, a closed connection). */
  private readonly retriedAfter = new WeakMap<Command, Error>();

  constructor(
    nodes: ClusterNode[],
    options: ClusterOptions,
    private readonly deadlineMs: number,
  ) {
    super(nodes, options);
    // ioredis re-sends a command whose node connection closed (a node dropped from the pool after a failover, a
    // reconnect), even once its caller was told it timed out: a write then lands on the new master seconds later,
    // after the caller's next ones. Each node's sends put a PING in its place.
    this.on('+node', (node: Redis) => {
      const send = node.sendCommand.bind(node) as (command: Command, stream?: unknown) => unknown;
      node.sendCommand = ((command: Command, stream?: unknown) => {
        // A PING, not skipped: in a pipeline every command must reach the socket, or the pipeline's
        // other commands are never written and the node's replies go to the wrong commands.
        if (this.timedOut.has(command)) {
          command.name = 'ping';
          command.args = [];
          return send(command, stream);
        }
        this.noteTimeout(command);
        return send(command, stream);
      }) as typeof node.sendCommand;
    });
  }

  /** Commands whose caller gave up on them (a durable write past its deadline): never sent again. */
  forget(commands: readonly Command[]): void {
    for (const command of commands) this.timedOut.add(command);
  }

  /**
   * Notes the command once it timed out (and asks for a fresh slot map). Its error then carries what the cluster last
   * answered while it was retried (`lastClusterAnswer`), if anything: a timeout through CLUSTERDOWN is not a silence.
   */
  private noteTimeout(command: Command): void {
    command.promise.catch((err: unknown) => {
      if (!(err instanceof Error) || !err.message.startsWith('Command timed out')) return;
      this.timedOut.add(command);
      const retried = this.retriedAfter.get(command);
      if (retried) Object.assign(err, { lastClusterAnswer: retried });
      this.refreshAfterTimeout();
    });
  }

  override sendCommand(command: Command, stream?: unknown, node?: unknown): unknown {
    const now = performance.now();
    const at = this.deadlineAt.get(command);
    const first = at === undefined;
    if (first) this.deadlineAt.set(command, now + this.deadlineMs);
    // Re-sent (a pipeline after a redirection): what is left of its deadline; past it, it times out at once.
    command.setTimeout(first ? this.deadlineMs : Math.max(1, Math.ceil(at - now)));
    this.noteTimeout(command);
    const sent = (super.sendCommand as (...args: unknown[]) => unknown)(command, stream, node);
    // ioredis has put its redirection handling in the command's reject (once per command): what it retries after is
    // noted on the way in. (A pipeline's commands are retried by the pipeline, with fresh rejects: not noted.)
    if (first) {
      const reject = command.reject;
      command.reject = (err: Error) => {
        if (RETRIED.test(err.message) || err.message === CONNECTION_CLOSED) this.retriedAfter.set(command, err);
        reject.call(command, err);
      };
    }
    return sent;
  }

  /**
   * A command that timed out may have gone to a master that froze or was cut off and has been replaced:
   * ioredis learns a new slot map only from a MOVED, which a silent node never sends, so every command of
   * its slots would time out until it answers again. A fresh map is asked for, at most once a second.
   */
  refreshAfterTimeout(): void {
    const now = performance.now();
    if (now - this.refreshedAt < REFRESH_AFTER_TIMEOUT_EVERY_MS || this.status !== 'ready') return;
    this.refreshedAt = now;
    this.refreshSlotsCache(() => undefined);
  }

  override delayUntilReady(callback: (err?: Error | null) => void): void {
    // Ended or being closed by us: it will never be ready.
    if (this.status === 'end' || this.status === 'disconnecting') return callback(new Error('Connection is closed.'));
    let answered = false;
    const answer = (err?: Error | null) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      callback(err);
    };
    const timer = setTimeout(
      () => answer(new Error(`Command timed out (the cluster was not ready within ${this.deadlineMs} ms)`)),
      this.deadlineMs,
    );
    super.delayUntilReady(answer);
  }
}

/**
 * A blocking lane: one node, whatever the deployment (a park names keys of one slot, so it is
 * served by one master). Never sends a park later than asked: ioredis would send one queued
 * while disconnected (offline queue), or re-send one cut by a disconnect, after the reconnect,
 * and that XREADGROUP … > would deliver entries to a reply nobody reads. Parks wait for the
 * lane to be ready instead (Lanes.prepareBlocking). No client-side deadline either (ioredis'
 * blockingTimeout): it would drop a reply that arrived while the event loop was busy.
 */
export function openBlockingConnection(node: RedisOptions, name: string): Redis {
  return new Redis({
    ...node,
    connectionName: name,
    maxRetriesPerRequest: node.maxRetriesPerRequest ?? 1,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    blockingTimeout: 0,
    commandTimeout: undefined,
  });
}

/** One node's options on a cluster: the shared node options, at `host:port`. */
export function nodeOptions(connection: ResolvedConnection, host: string, port: number): RedisOptions {
  return isCluster(connection) ? { ...connection.options.redisOptions, host, port } : connection;
}

/** How long `close()` waits for Redis to answer QUIT before it just drops the connection. */
const QUIT_WAIT_MS = 1000;

/** QUIT, or a plain disconnect when the connection is down or Redis does not answer within a second (a paused server). */
export async function closeConnection(conn: RedisConnection): Promise<void> {
  if (conn.status === 'end') return;
  if (conn.status !== 'ready') return disconnectNow(conn);
  const said = await within(
    conn.quit().then(
      () => true,
      () => false,
    ),
    QUIT_WAIT_MS,
    false,
  );
  if (!said) conn.disconnect();
}

/** ioredis' own close, done now: what it does when a socket's close event finds the connection closed by hand. */
interface ClosableInternals {
  setStatus?(status: 'end'): void;
  flushQueue?(error: Error): void;
}

/**
 * Disconnects, and ends at once a one-node connection that ioredis left between two reconnect
 * attempts: it has no socket whose close would end it, so it would stay `reconnecting` with its
 * queued commands (each holding a `commandTimeout` timer, the process with it) until they time out.
 */
function disconnectNow(conn: RedisConnection): void {
  conn.disconnect();
  if ((conn as { isCluster?: boolean }).isCluster || conn.status !== 'reconnecting') return;
  const internals = conn as unknown as ClosableInternals;
  internals.setStatus?.('end');
  internals.flushQueue?.(new Error('Connection is closed.'));
}
