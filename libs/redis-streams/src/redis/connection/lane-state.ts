import { BehaviorSubject, filter, firstValueFrom, map, of, race, timeout, type Observable } from 'rxjs';
import type { RedisConnection } from './connect.js';

export type LaneState = 'connecting' | 'ready' | 'reconnecting' | 'closed';

/** The ioredis events that change a lane's state (each named after the status it enters). */
const STATE_EVENTS = ['ready', 'reconnecting', 'end'] as const;

/** The one derivation of a lane's state: from an ioredis status (or the event that entered it). */
export function laneStateOf(status: string): LaneState {
  if (status === 'ready') return 'ready';
  if (status === 'reconnecting') return 'reconnecting';
  return status === 'end' ? 'closed' : 'connecting';
}

/**
 * A connection's state from its creation on. Read from the events, not from `status` at event
 * time: ioredis emits on the next tick, when the status may have moved on.
 */
export function watchState(conn: RedisConnection): BehaviorSubject<LaneState> {
  const state = new BehaviorSubject<LaneState>('connecting');
  for (const event of STATE_EVENTS) conn.on(event, () => state.next(laneStateOf(event)));
  return state;
}

/** Several lanes' states as one: ready only when all are; closed when any is. */
export function foldLaneStates(states: readonly LaneState[]): LaneState {
  if (states.includes('closed')) return 'closed';
  if (states.every((s) => s === 'ready')) return 'ready';
  return states.includes('reconnecting') ? 'reconnecting' : 'connecting';
}

/** True once `conn` is ready; false if it closes, `cancel$` emits, or `timeoutMs` passes first. */
export function untilReady(
  conn: RedisConnection,
  state$: Observable<LaneState>,
  timeoutMs: number,
  cancel$: Observable<unknown>,
): Promise<boolean> {
  if (laneStateOf(conn.status) === 'ready') return Promise.resolve(true);
  const ready$ = state$.pipe(
    filter((s) => s === 'ready' || s === 'closed'),
    map((s) => s === 'ready'),
  );
  return firstValueFrom(race(ready$, cancel$.pipe(map(() => false))).pipe(timeout({ first: timeoutMs, with: () => of(false) })));
}
