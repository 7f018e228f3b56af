import type { Observable } from 'rxjs';
import type { ResolvedConnection } from '../../options/connection.js';
import { closeConnection, openCommandConnection, type RedisConnection } from './connect.js';
import { watchState, type LaneState } from './lane-state.js';
import { explainConnectionError } from '../replies/redis-errors.js';

/** ioredis tries to reconnect a lane in `delayMs` (undefined on a cluster, which does not say). */
export type RetryListener = (lane: string, delayMs: number | undefined) => void;

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
  onRetry?: RetryListener,
): CommandLane {
  const conn = openCommandConnection(connection, `${name}:command`, commandTimeoutMs);
  // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
  conn.on('error', (err: Error) => onError('command', explainConnectionError(err)));
  if (onRetry) conn.on('reconnecting', (delayMs?: number) => onRetry('command', delayMs));
  return { conn, state$: watchState(conn) };
}

/** Closes a command lane opened with {@link openCommandLane}. */
export function closeCommandLane(lane: CommandLane): Promise<void> {
  return closeConnection(lane.conn);
}
