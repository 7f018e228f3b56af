import type { Redis, RedisOptions } from 'ioredis';
import { BehaviorSubject, defer, map, of, switchAll, type Observable } from 'rxjs';
import { within } from '../../within.js';
import { closeConnection, openBlockingConnection } from './connect.js';
import type { RetryListener } from './command-lane.js';
import { laneStateOf, untilReady, watchState, type LaneState } from './lane-state.js';
import { PARK_GRACE_MS } from './park-watchdog.js';
import { explainConnectionError } from '../replies/redis-errors.js';

/**
 * A reader's private connection for its park, to one node at a time, and the client id that
 * CLIENT UNBLOCK needs to wake it. Pointed elsewhere (`retarget`), it opens a new connection
 * there and drops the old one.
 */
export class BlockingLane {
  /** The current connection's state (`connecting` before the first). */
  readonly state$: Observable<LaneState>;
  /**
   * `state$` as the lanes' status and log read it: a lane re-pointed from a ready connection (its slot moved) moved,
   * it was not lost, so the new connection's `connecting` reads as `ready` until its first other state (a new node
   * that refuses shows as `reconnecting` then), or until a park could not be sent on it in time (a node that takes
   * the connection and never answers: see prepare). A park waits on `state$`, the real one.
   */
  readonly reportedState$: Observable<LaneState>;
  /**
   * `reportedState$` from the lane's first `ready` on; undefined until then (a lane opened on demand, a producer's
   * replies, is no state to wait for before it was ever up).
   */
  readonly stateOnceReady$: Observable<LaneState | undefined>;
  private everReady = false;
  private conn: Redis | undefined;
  private target: string | undefined;
  private clientId: number | undefined;
  private readonly states = new BehaviorSubject<Observable<LaneState>>(of('connecting'));
  private readonly reported = new BehaviorSubject<Observable<LaneState>>(of('connecting'));
  /** The new connection's real state while a move reads it as `ready` (see reportedState$). */
  private moving: Observable<LaneState> | undefined;

  constructor(
    private readonly name: string,
    private readonly onError: (lane: string, err: Error) => void,
    private readonly onRetry?: RetryListener,
  ) {
    this.state$ = this.states.pipe(switchAll());
    this.reportedState$ = this.reported.pipe(switchAll());
    this.stateOnceReady$ = this.reportedState$.pipe(
      map((s) => {
        if (s === 'ready') this.everReady = true;
        return this.everReady ? s : undefined;
      }),
    );
  }

  get connection(): Redis | undefined {
    return this.conn;
  }

  /** `host:port` of the node it connects to. */
  get node(): string | undefined {
    return this.target;
  }

  /** The id CLIENT UNBLOCK needs; undefined until learnt on this connection. */
  get id(): number | undefined {
    return this.clientId;
  }

  /** Points the lane at `target` (`host:port`, reached with `options`): a new connection there, the old one dropped. */
  retarget(options: RedisOptions, target: string): void {
    const old = this.conn;
    const conn = openBlockingConnection(options, this.name);
    this.conn = conn;
    this.target = target;
    this.clientId = undefined;
    conn.on('error', (err: Error) => this.onError('blocking', explainConnectionError(err)));
    conn.on('reconnecting', (delayMs?: number) => this.onRetry?.('blocking', delayMs));
    // A reconnect gets a new client id; fetch it again before the next park.
    conn.on('close', () => {
      if (this.conn === conn) this.clientId = undefined;
    });
    const state = watchState(conn);
    this.states.next(state);
    this.moving = old && laneStateOf(old.status) === 'ready' ? state : undefined;
    this.reported.next(this.moving ? asMove(state) : state);
    old?.disconnect();
  }

  /**
   * Waits until connected, at most `timeoutMs` or until `cancel$` emits, then learns the client
   * id (once per connection). False: not connected in time (no park should be sent).
   */
  async prepare(timeoutMs: number, cancel$: Observable<unknown>): Promise<boolean> {
    const conn = this.conn!;
    if (!(await untilReady(conn, this.state$, timeoutMs, cancel$)) || conn !== this.conn) {
      // Not up within a park's wait: no longer a move, what the status and the log say is the real state.
      if (conn === this.conn) this.endMove();
      return false;
    }
    if (this.clientId !== undefined) return true;
    // Bounded like a park: a lane that goes silent right after connecting is dropped, not waited on.
    const id = await within(
      conn.client('ID').catch(() => undefined),
      timeoutMs + PARK_GRACE_MS,
      undefined,
    );
    if (id === undefined) {
      conn.disconnect(true);
      return false;
    }
    this.clientId = Number(id);
    return true;
  }

  /** A move that did not come up in time reads as what it is from now on. */
  private endMove(): void {
    if (!this.moving) return;
    this.reported.next(this.moving);
    this.moving = undefined;
  }

  /** Ends a park at once through `waker` (a connection to the same node). False when nothing was parked. */
  async unblock(waker: Redis | undefined): Promise<boolean> {
    if (this.clientId === undefined || !waker) return false;
    const woken = await waker.client('UNBLOCK', this.clientId).catch(() => 0);
    return Number(woken) === 1;
  }

  /** Cuts the connection (a park on it fails at once); it reconnects for the next park. */
  drop(): void {
    this.conn?.disconnect(true);
  }

  close(): Promise<void> {
    if (!this.conn) {
      this.states.next(of('closed'));
      return Promise.resolve();
    }
    return closeConnection(this.conn);
  }
}

/** A new connection's states after a move from a ready one: `ready` until its first state other than `connecting`. */
function asMove(state$: Observable<LaneState>): Observable<LaneState> {
  return defer(() => {
    let moving = true;
    return state$.pipe(
      map((s) => {
        moving &&= s === 'connecting';
        return moving ? 'ready' : s;
      }),
    );
  });
}
