import type { LaneState } from './redis/lanes.js';

/** What `server.status` and `client.status` emit. */
export enum RedisStreamsStatus {
  CONNECTING = 'connecting',
  CONNECTED = 'connected',
  RECONNECTING = 'reconnecting',
  DISCONNECTED = 'disconnected',
  CLOSING = 'closing',
  CLOSED = 'closed',
}

/** Connection states of the two lanes, as the user-facing status. */
export const STATUS_OF_LANES: Record<LaneState, RedisStreamsStatus> = {
  connecting: RedisStreamsStatus.CONNECTING,
  ready: RedisStreamsStatus.CONNECTED,
  reconnecting: RedisStreamsStatus.RECONNECTING,
  closed: RedisStreamsStatus.DISCONNECTED,
};
