/** What `server.status` and `client.status` emit. */
export enum RedisStreamsStatus {
  CONNECTING = 'connecting',
  CONNECTED = 'connected',
  RECONNECTING = 'reconnecting',
  DISCONNECTED = 'disconnected',
  CLOSING = 'closing',
  CLOSED = 'closed',
}
