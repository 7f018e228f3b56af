import type { Cluster, Redis } from 'ioredis';
import {
  BehaviorSubject,
  combineLatest,
  distinctUntilChanged,
  filter,
  firstValueFrom,
  map,
  NEVER,
  of,
  race,
  timeout,
  type Observable,
} from 'rxjs';
import { isCluster, type ResolvedConnection } from '../options/connection.js';
import { within } from '../within.js';
import { nodeOptions, openBlockingConnection, openCommandConnection, type RedisConnection } from './connect.js';
import { slotOf } from './slots.js';

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

/** The command lane: one connection (or one ioredis Cluster), shareable by the lanes of every slot. */
export interface CommandLane {
  readonly conn: RedisConnection;
  readonly state$: Observable<LaneState>;
}

/**
 * Opens a command lane. `commandTimeoutMs`: deadline of each command. ioredis keeps a command
 * cut by a disconnect until a reconnect succeeds, which may be never (the ACL user was
 * deleted, the password rotated): without a deadline its caller, and a `close()` waiting for
 * it, would wait forever.
 */
export function openCommandLane(
  connection: ResolvedConnection,
  name: string,
  onError: (lane: string, err: Error) => void,
  commandTimeoutMs?: number,
): CommandLane {
  const conn = openCommandConnection(connection, `${name}:command`, commandTimeoutMs);
  // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
  conn.on('error', (err: Error) => onError('command', err));
  return { conn, state$: laneState(conn) };
}

export interface LanesConfig {
  connection: ResolvedConnection;
  /** Connection names: `<name>:command`, `<name>:blocking`. */
  name: string;
  onError: (lane: string, err: Error) => void;
  commandTimeoutMs?: number;
  /** A command lane shared with other Lanes (the caller closes it); otherwise these Lanes open and close their own. */
  command?: CommandLane;
  /** On a cluster: a key of the slot this lane parks on (the blocking connection goes to that slot's master). */
  slotKey?: string;
}

/**
 * The connections of one reader: `command` carries every non-blocking command (groups,
 * reclaim, acks, leases); `blocking` only ever parks on a blocking read, so a long park never
 * delays an ack. The park can be woken with CLIENT UNBLOCK, sent to the node it is parked on.
 * On a cluster the blocking connection goes to the master serving `slotKey`'s slot, and
 * follows the slot when it moves (failover, resharding).
 */
export class Lanes {
  readonly command: RedisConnection;
  /** The command lane's state alone (what a write waits for). */
  readonly commandState$: Observable<LaneState>;
  /** Both lanes' states folded into one: ready only when both are. */
  readonly state$: Observable<LaneState>;
  private conn: Redis | undefined;
  private target: string | undefined;
  private blockingClientId: number | undefined;
  /** Cluster: a park failed, so the slot may have moved; ask the cluster before the next one. */
  private stale = false;
  private closed = false;
  private readonly commandLane: CommandLane;
  private readonly ownsCommand: boolean;
  private readonly blockingState$ = new BehaviorSubject<LaneState>('connecting');

  constructor(private readonly config: LanesConfig) {
    this.ownsCommand = config.command === undefined;
    this.commandLane = config.command ?? openCommandLane(config.connection, config.name, config.onError, config.commandTimeoutMs);
    this.command = this.commandLane.conn;
    this.commandState$ = this.commandLane.state$;
    if (isCluster(config.connection)) {
      if (config.slotKey === undefined) throw new Error('a cluster lane needs the key of the slot it parks on');
    } else {
      this.retarget(config.connection.host ?? '127.0.0.1', config.connection.port ?? 6379);
    }
    this.state$ = combineLatest([this.commandLane.state$, this.blockingState$]).pipe(map(foldLaneStates), distinctUntilChanged());
  }

  /** The blocking connection; on a cluster it exists from the first park on. */
  get blocking(): Redis {
    if (!this.conn) throw new Error('the blocking connection is not open yet (it opens with the first read)');
    return this.conn;
  }

  /** The blocking connection if open (on a cluster it opens with the first read). */
  blockingConnection(): Redis | undefined {
    return this.conn;
  }

  /** Both connections are up. */
  ready(): boolean {
    return this.command.status === 'ready' && this.conn?.status === 'ready';
  }

  /** A park can be sent now, with nothing to wait for (what prepareBlocking would answer at once). */
  readyToPark(): boolean {
    // Not on a cluster, where each park first asks which master serves the slot (`stale` is only read there).
    return !this.closed && this.blockingClientId !== undefined && this.conn?.status === 'ready' && !isCluster(this.config.connection);
  }

  /**
   * Waits until the blocking lane is connected (on a cluster: to the master of its slot), at
   * most `timeoutMs` or until `cancel$` emits, then learns its client id (once per connection)
   * so that a park can be woken. False: not connected in time (no park should be sent).
   */
  async prepareBlocking(timeoutMs: number, cancel$: Observable<unknown> = NEVER): Promise<boolean> {
    if (this.closed) return false;
    const waitReady = async (state$: Observable<LaneState>, status: () => string) => {
      if (status() === 'ready') return true;
      const ready$ = state$.pipe(
        filter((s) => s === 'ready' || s === 'closed'),
        map((s) => s === 'ready'),
      );
      return firstValueFrom(race(ready$, cancel$.pipe(map(() => false))).pipe(timeout({ first: timeoutMs, with: () => of(false) })));
    };
    if (isCluster(this.config.connection)) {
      // The slot map comes with the cluster connection.
      if (!(await waitReady(this.commandLane.state$, () => this.command.status))) return false;
      const master = await this.slotMaster(timeoutMs);
      if (!master) return false;
      if (master !== this.target) {
        const at = master.lastIndexOf(':');
        this.retarget(master.slice(0, at), Number(master.slice(at + 1)));
      }
    }
    const conn = this.conn!;
    if (!(await waitReady(this.blockingState$, () => conn.status)) || conn !== this.conn) return false;
    if (this.blockingClientId === undefined) {
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
    } catch (err) {
      // MOVED, UNBLOCKED (a master turned replica), a dropped node: find the slot's master again.
      this.stale = true;
      throw err;
    } finally {
      for (const t of timers) clearTimeout(t);
      conn.off('close', onClose!);
    }
  }

  /** Ends a park at once, as if BLOCK had timed out. Returns false when nothing was parked. */
  async unblock(): Promise<boolean> {
    const waker = this.waker();
    if (this.blockingClientId === undefined || !waker) return false;
    const woken = await waker.client('UNBLOCK', this.blockingClientId).catch(() => 0);
    return Number(woken) === 1;
  }

  /** Cuts the blocking connection (a park on it fails at once); it reconnects for the next park. */
  dropBlocking(): void {
    this.conn?.disconnect(true);
  }

  /** QUIT both lanes (a shared command lane is its owner's to close); a lane that cannot say goodbye within a second is disconnected. */
  async close(): Promise<void> {
    this.closed = true;
    const conns: RedisConnection[] = [...(this.conn ? [this.conn] : []), ...(this.ownsCommand ? [this.command] : [])];
    if (!this.conn) this.blockingState$.next('closed');
    await Promise.all(conns.map((conn) => closeConnection(conn)));
  }

  /** A connection to the node the park is on: the command connection, or on a cluster its connection to that node. */
  private waker(): Redis | undefined {
    if (!isCluster(this.config.connection)) return this.command.status === 'ready' ? (this.command as Redis) : undefined;
    const target = this.target;
    return (this.command as Cluster).nodes('all').find((n) => `${n.options.host}:${n.options.port}` === target && n.status === 'ready');
  }

  /** `host:port` of the master serving this lane's slot, per the cluster's slot map (refreshed after a failed park). */
  private async slotMaster(timeoutMs: number): Promise<string | undefined> {
    const cluster = this.command as Cluster;
    if (this.stale) {
      this.stale = false;
      await within(new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve())), timeoutMs, undefined);
    }
    return cluster.slots[slotOf(this.config.slotKey!)]?.[0];
  }

  /** Points the blocking lane at `host:port`: a new connection there, the old one dropped. */
  private retarget(host: string, port: number): void {
    const old = this.conn;
    const conn = openBlockingConnection(nodeOptions(this.config.connection, host, port), `${this.config.name}:blocking`);
    this.conn = conn;
    this.target = `${host}:${port}`;
    this.blockingClientId = undefined;
    conn.on('error', (err: Error) => this.config.onError('blocking', err));
    // A reconnect gets a new client id; fetch it again before the next park.
    conn.on('close', () => {
      if (this.conn === conn) this.blockingClientId = undefined;
    });
    const report = (state: LaneState) => () => {
      if (this.conn === conn) this.blockingState$.next(state);
    };
    conn.on('ready', report('ready'));
    conn.on('reconnecting', report('reconnecting'));
    conn.on('end', report('closed'));
    if (old) {
      this.blockingState$.next('connecting');
      old.disconnect();
    }
  }
}

/** Closes a command lane opened with {@link openCommandLane}. */
export function closeCommandLane(lane: CommandLane): Promise<void> {
  return closeConnection(lane.conn);
}

/** Several lanes' states as one: ready only when all are; closed when any is. */
export function foldLaneStates(states: readonly LaneState[]): LaneState {
  if (states.includes('closed')) return 'closed';
  if (states.every((s) => s === 'ready')) return 'ready';
  return states.includes('reconnecting') ? 'reconnecting' : 'connecting';
}

/** QUIT, or a plain disconnect when the connection is down or Redis does not answer within a second (a paused server). */
async function closeConnection(conn: RedisConnection): Promise<void> {
  if (conn.status === 'end') return;
  if (conn.status !== 'ready') return conn.disconnect();
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

function laneState(conn: RedisConnection): Observable<LaneState> {
  const state = new BehaviorSubject<LaneState>('connecting');
  conn.on('ready', () => state.next('ready'));
  conn.on('reconnecting', () => state.next('reconnecting'));
  conn.on('end', () => state.next('closed'));
  return state;
}
