export type { RedisStreamsEvents } from '../engine/events.js';
