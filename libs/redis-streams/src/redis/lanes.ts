import { Redis, type RedisOptions } from 'ioredis';
import { BehaviorSubject, combineLatest, distinctUntilChanged, filter, firstValueFrom, map, NEVER, of, race, timeout, type Observable } from 'rxjs';

/** How long past BLOCK a park may go unanswered before it counts as lost. */
const BLOCKING_GRACE_MS = 2000;

export type LaneState = 'connecting' | 'ready' | 'reconnecting' | 'closed';

/**
 * The two connections of one consumer: `command` carries every non-blocking command (groups,
 * reclaim, acks, leases); `blocking` only ever parks on XREADGROUP … BLOCK, so a long park
 * never delays an ack. The blocking lane can be woken with CLIENT UNBLOCK sent over `command`.
 */
export class Lanes {
  readonly command: Redis;
  readonly blocking: Redis;
  /** Both lanes' states folded into one: ready only when both are. */
  readonly state$: Observable<LaneState>;
  private blockingClientId: number | undefined;
  private readonly blockingState$: Observable<LaneState>;

  /**
   * `commandTimeoutMs`: deadline of each command on the command lane. ioredis keeps a command
   * cut by a disconnect until a reconnect succeeds, which may be never (the ACL user was
   * deleted, the password rotated): without a deadline its caller, and a `close()` waiting
   * for it, would wait forever.
   */
  constructor(options: RedisOptions, name: string, blockMs: number, onError: (lane: string, err: Error) => void, commandTimeoutMs?: number) {
    const make = (lane: 'command' | 'blocking') => {
      const conn = new Redis({
        ...options,
        connectionName: `${name}:${lane}`,
        // The loop retries with its own backoff; commands must not wait in ioredis forever.
        maxRetriesPerRequest: options.maxRetriesPerRequest ?? 1,
        // A park is never sent later than asked: ioredis would send one queued while
        // disconnected (offline queue), or re-send one cut by a disconnect, after the reconnect
        // even when its client-side deadline (BLOCK + grace) had already settled it, and that
        // XREADGROUP … > would deliver entries to a reply nobody reads (they would sit in the
        // PEL until a reclaim). Parks wait for the lane to be ready instead (prepareBlocking),
        // and a cut one ends at its deadline.
        ...(lane === 'blocking'
          ? { blockingTimeout: blockMs, blockingTimeoutGrace: BLOCKING_GRACE_MS, enableOfflineQueue: false, autoResendUnfulfilledCommands: false }
          : {}),
        ...(lane === 'command' && commandTimeoutMs !== undefined ? { commandTimeout: options.commandTimeout ?? commandTimeoutMs } : {}),
      });
      // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
      conn.on('error', (err: Error) => onError(lane, err));
      return conn;
    };
    this.command = make('command');
    this.blocking = make('blocking');
    // A reconnect gets a new client id; fetch it again before the next park.
    this.blocking.on('close', () => (this.blockingClientId = undefined));
    this.blockingState$ = laneState(this.blocking);
    this.state$ = combineLatest([laneState(this.command), this.blockingState$]).pipe(
      map(([a, b]) => (a === b ? a : a === 'closed' || b === 'closed' ? 'closed' : a === 'ready' ? b : a)),
      distinctUntilChanged(),
    );
  }

  /**
   * Waits until the blocking lane is connected, at most `timeoutMs` or until `cancel$` emits,
   * then learns its client id (once per connection) so that a park can be woken. False: not
   * connected in time (no park should be sent).
   */
  async prepareBlocking(timeoutMs: number, cancel$: Observable<unknown> = NEVER): Promise<boolean> {
    if (this.blocking.status !== 'ready') {
      const ready$ = this.blockingState$.pipe(
        filter((s) => s === 'ready' || s === 'closed'),
        map((s) => s === 'ready'),
      );
      const ready = await firstValueFrom(race(ready$, cancel$.pipe(map(() => false))).pipe(timeout({ first: timeoutMs, with: () => of(false) })));
      if (!ready) return false;
    }
    if (this.blockingClientId === undefined) {
      this.blockingClientId = Number(await this.blocking.client('ID'));
    }
    return true;
  }

  /** Ends a park at once, as if BLOCK had timed out. Returns false when nothing was parked. */
  async unblock(): Promise<boolean> {
    if (this.blockingClientId === undefined || this.command.status !== 'ready') return false;
    const woken = await this.command.client('UNBLOCK', this.blockingClientId).catch(() => 0);
    return Number(woken) === 1;
  }

  /** QUIT both lanes; a lane that cannot say goodbye (down) is disconnected. */
  async close(): Promise<void> {
    await Promise.all(
      [this.command, this.blocking].map(async (conn) => {
        if (conn.status === 'end') return;
        if (conn.status !== 'ready') return conn.disconnect();
        await conn.quit().catch(() => conn.disconnect());
      }),
    );
  }
}

function laneState(conn: Redis): Observable<LaneState> {
  const state = new BehaviorSubject<LaneState>('connecting');
  conn.on('ready', () => state.next('ready'));
  conn.on('reconnecting', () => state.next('reconnecting'));
  conn.on('end', () => state.next('closed'));
  return state;
}
