import type { Cluster, Redis } from 'ioredis';
import { combineLatest, distinctUntilChanged, map, NEVER, type Observable } from 'rxjs';
import { isCluster, type ResolvedConnection } from '../../options/connection.js';
import { BlockingLane } from './blocking-lane.js';
import { openCommandLane, type CommandLane, type RetryListener } from './command-lane.js';
import { closeConnection, nodeOptions, type RedisConnection } from './connect.js';
import { foldLaneStates, laneStateOf, untilReady, type LaneState } from './lane-state.js';
import { watchPark } from './park-watchdog.js';
import { SlotFollower } from './slot-follower.js';

export interface LanesConfig {
  connection: ResolvedConnection;
  /** Connection names: `<name>:command`, `<name>:blocking`. */
  name: string;
  onError: (lane: string, err: Error) => void;
  /** ioredis will try to reconnect a lane in `delayMs`. */
  onRetry?: RetryListener;
  commandTimeoutMs?: number;
  /** A command lane shared with other Lanes (the caller closes it); otherwise these Lanes open and close their own. */
  command?: CommandLane;
  /** On a cluster: a key of the slot this lane parks on (the blocking connection goes to that slot's master). */
  slotKey?: string;
  /** The blocking lane is used now and then (a producer's replies), not parked on at once: see `state$`. */
  blockingOnDemand?: boolean;
}

/**
 * The connections of one reader: `command` carries every non-blocking command (groups,
 * reclaim, acks, leases); the blocking lane only ever parks on a blocking read, so a long park
 * never delays an ack. The park can be woken with CLIENT UNBLOCK, sent to the node it is parked
 * on. On a cluster the blocking connection goes to the master serving `slotKey`'s slot, and
 * follows the slot when it moves (failover, resharding).
 */
export class Lanes {
  readonly command: RedisConnection;
  /** The command lane's state alone (what a write waits for). */
  readonly commandState$: Observable<LaneState>;
  /** Both lanes' states folded into one: ready only when both are (with `blockingOnDemand`, the blocking lane once it was up). */
  readonly state$: Observable<LaneState>;
  readonly blockingLane: BlockingLane;
  /** Cluster only: where the slot's master is. */
  private readonly slots: SlotFollower | undefined;
  private closed = false;
  private readonly ownsCommand: boolean;

  constructor(private readonly config: LanesConfig) {
    this.ownsCommand = config.command === undefined;
    const commandLane =
      config.command ?? openCommandLane(config.connection, config.name, config.onError, config.commandTimeoutMs, config.onRetry);
    this.command = commandLane.conn;
    this.commandState$ = commandLane.state$;
    this.blockingLane = new BlockingLane(`${config.name}:blocking`, config.onError, config.onRetry);
    if (isCluster(config.connection)) {
      if (config.slotKey === undefined) throw new Error('a cluster lane needs the key of the slot it parks on');
      this.slots = new SlotFollower(this.command as Cluster, config.slotKey);
    } else {
      const { host = '127.0.0.1', port = 6379 } = config.connection;
      this.blockingLane.retarget(config.connection, `${host}:${port}`);
    }
    // A reader parks at once: both lanes from the start. A producer's blocking lane opens with its first send (on a
    // cluster): it counts from its first `ready` on, so neither its absence nor its opening reads as a lost connection.
    this.state$ = config.blockingOnDemand
      ? combineLatest([this.commandState$, this.blockingLane.stateOnceReady$]).pipe(
          map(([command, blocking]) => (blocking === undefined ? command : foldLaneStates([command, blocking]))),
          distinctUntilChanged(),
        )
      : combineLatest([this.commandState$, this.blockingLane.reportedState$]).pipe(map(foldLaneStates), distinctUntilChanged());
  }

  /** The blocking connection; on a cluster it exists from the first park on. */
  get blocking(): Redis {
    const conn = this.blockingLane.connection;
    if (!conn) throw new Error('the blocking connection is not open yet (it opens with the first read)');
    return conn;
  }

  /** The blocking connection if open (on a cluster it opens with the first read). */
  blockingConnection(): Redis | undefined {
    return this.blockingLane.connection;
  }

  /** Both connections are up. */
  ready(): boolean {
    const blocking = this.blockingLane.connection;
    return laneStateOf(this.command.status) === 'ready' && blocking !== undefined && laneStateOf(blocking.status) === 'ready';
  }

  /** A park can be sent now, with nothing to wait for (what prepareBlocking would answer at once). */
  readyToPark(): boolean {
    // Not on a cluster, where each park first asks which master serves the slot.
    const conn = this.blockingLane.connection;
    return !this.closed && this.blockingLane.id !== undefined && conn !== undefined && laneStateOf(conn.status) === 'ready' && !this.slots;
  }

  /**
   * Waits until the blocking lane is connected (on a cluster: to the master of its slot), at
   * most `timeoutMs` or until `cancel$` emits, then learns its client id (once per connection)
   * so that a park can be woken. False: not connected in time (no park should be sent).
   */
  async prepareBlocking(timeoutMs: number, cancel$: Observable<unknown> = NEVER): Promise<boolean> {
    if (this.closed) return false;
    if (this.slots) {
      // The slot map comes with the cluster connection.
      if (!(await untilReady(this.command, this.commandState$, timeoutMs, cancel$))) return false;
      const master = await this.slots.master(timeoutMs);
      if (!master) return false;
      if (master !== this.blockingLane.node) {
        const at = master.lastIndexOf(':');
        this.blockingLane.retarget(nodeOptions(this.config.connection, master.slice(0, at), Number(master.slice(at + 1))), master);
      }
    }
    return this.blockingLane.prepare(timeoutMs, cancel$);
  }

  /** Redis' answer to a park sent on the blocking lane (see watchPark); a failed park makes a cluster lane look up its slot again. */
  awaitPark<T>(read: Promise<T>, blockMs: number): Promise<T> {
    const parked = watchPark(this.blocking, read, blockMs, this.wake);
    // Once per park: off a cluster, the watchdog's promise itself (no frame of its own).
    if (!this.slots) return parked;
    return parked.catch((err: unknown) => {
      this.slots?.markStale();
      throw err;
    });
  }

  /** The park watchdog's wake (one function for every park). */
  private readonly wake = (): Promise<boolean> => this.unblock();

  /** Ends a park at once, as if BLOCK had timed out. Returns false when nothing was parked. */
  unblock(): Promise<boolean> {
    return this.blockingLane.unblock(this.waker());
  }

  /** Cuts the blocking connection (a park on it fails at once); it reconnects for the next park. */
  dropBlocking(): void {
    this.blockingLane.drop();
  }

  /** QUIT both lanes (a shared command lane is its owner's to close); a lane that cannot say goodbye within a second is disconnected. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([this.blockingLane.close(), ...(this.ownsCommand ? [closeConnection(this.command)] : [])]);
  }

  /** A connection to the node the park is on: the command connection, or on a cluster its connection to that node. */
  private waker(): Redis | undefined {
    if (this.slots) return this.slots.connectionTo(this.blockingLane.node);
    return laneStateOf(this.command.status) === 'ready' ? (this.command as Redis) : undefined;
  }
}
