import { Redis, type RedisOptions } from 'ioredis';
import { within } from '../within.js';
import { BehaviorSubject, combineLatest, distinctUntilChanged, filter, firstValueFrom, map, NEVER, of, race, timeout, type Observable } from 'rxjs';

/** How long past BLOCK (and again past CLIENT UNBLOCK) a park may go unanswered before its connection counts as dead. */
const PARK_GRACE_MS = 2000;

/** How long `close()` waits for Redis to answer QUIT before it just drops the connection. */
const QUIT_WAIT_MS = 1000;

/** A park whose connection closed or went silent: whatever it delivered is in this consumer's PEL, unseen. */
export class ParkLostError extends Error {
  constructor(reason: string) {
    super(`blocking read lost: ${reason}`);
    this.name = 'ParkLostError';
  }
}

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
  constructor(options: RedisOptions, name: string, onError: (lane: string, err: Error) => void, commandTimeoutMs?: number) {
    const make = (lane: 'command' | 'blocking') => {
      const conn = new Redis({
        ...options,
        connectionName: `${name}:${lane}`,
        // The loop retries with its own backoff; commands must not wait in ioredis forever.
        maxRetriesPerRequest: options.maxRetriesPerRequest ?? 1,
        // A park is never sent later than asked: ioredis would send one queued while
        // disconnected (offline queue), or re-send one cut by a disconnect, after the reconnect,
        // and that XREADGROUP … > would deliver entries to a reply nobody reads. Parks wait for
        // the lane to be ready instead (prepareBlocking). No client-side deadline either
        // (ioredis' blockingTimeout): it would drop a reply that arrived while the event loop
        // was busy; awaitPark waits for Redis' answer and detects a dead lane itself.
        ...(lane === 'blocking' ? { enableOfflineQueue: false, autoResendUnfulfilledCommands: false, blockingTimeout: 0, commandTimeout: undefined } : {}),
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
      // Bounded like a park: a lane that goes silent right after connecting is dropped, not waited on.
      const id = await within(this.blocking.client('ID').catch(() => undefined), timeoutMs + PARK_GRACE_MS, undefined);
      if (id === undefined) {
        this.blocking.disconnect(true);
        return false;
      }
      this.blockingClientId = Number(id);
    }
    return true;
  }

  /**
   * Redis' answer to a blocking read sent on the blocking lane, however late the event loop
   * gets to it: a handler that held the loop past BLOCK must not cost the entries Redis
   * delivered meanwhile. Past BLOCK + grace the park is woken (CLIENT UNBLOCK) and waited for
   * once more; a lane silent even then, or closed while parked, is dropped and the park fails
   * with {@link ParkLostError} (what it delivered, if anything, is in this consumer's PEL,
   * where a restart's self-drain finds it).
   */
  async awaitPark<T>(read: Promise<T>, blockMs: number): Promise<T> {
    const conn = this.blocking;
    const timers: NodeJS.Timeout[] = [];
    const after = (ms: number) => new Promise<'silent'>((resolve) => timers.push(setTimeout(() => resolve('silent'), ms)));
    let onClose: (() => void) | undefined;
    const lost = new Promise<never>((_, reject) => {
      onClose = () => reject(new ParkLostError('the connection closed while parked'));
      conn.once('close', onClose);
    });
    lost.catch(() => undefined);
    try {
      if ((await Promise.race([read, lost, after(blockMs + PARK_GRACE_MS)])) !== 'silent') return await read;
      // Wake it; the grace runs from Redis' answer to the UNBLOCK (a paused server answers late, not never).
      const woken = this.unblock().then(() => after(PARK_GRACE_MS));
      if ((await Promise.race([read, lost, woken])) !== 'silent') return await read;
      conn.disconnect(true);
      throw new ParkLostError(`no answer to a park with BLOCK ${blockMs}, even ${PARK_GRACE_MS} ms after CLIENT UNBLOCK`);
    } finally {
      for (const t of timers) clearTimeout(t);
      conn.off('close', onClose!);
    }
  }

  /** Ends a park at once, as if BLOCK had timed out. Returns false when nothing was parked. */
  async unblock(): Promise<boolean> {
    if (this.blockingClientId === undefined || this.command.status !== 'ready') return false;
    const woken = await this.command.client('UNBLOCK', this.blockingClientId).catch(() => 0);
    return Number(woken) === 1;
  }

  /** QUIT both lanes; a lane that cannot say goodbye (down, or a paused server) within a second is disconnected. */
  async close(): Promise<void> {
    await Promise.all(
      [this.command, this.blocking].map(async (conn) => {
        if (conn.status === 'end') return;
        if (conn.status !== 'ready') return conn.disconnect();
        const said = await within(conn.quit().then(() => true, () => false), QUIT_WAIT_MS, false);
        if (!said) conn.disconnect();
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
