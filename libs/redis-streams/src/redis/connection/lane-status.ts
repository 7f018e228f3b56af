import { RedisStreamsStatus } from '../../status.js';
import type { LaneState } from './lane-state.js';

/** Connection states of the two lanes, as the user-facing status. */
export const STATUS_OF_LANES: Record<LaneState, RedisStreamsStatus> = {
  connecting: RedisStreamsStatus.CONNECTING,
  ready: RedisStreamsStatus.CONNECTED,
  reconnecting: RedisStreamsStatus.RECONNECTING,
  closed: RedisStreamsStatus.DISCONNECTED,
};
