// `nestjs-redis-streams/terminus`: its own entry point, so apps without @nestjs/terminus never load it.
export { RedisStreamsHealthIndicator, type HealthSource } from './redis-streams-health.indicator.js';
export {
  checkLiveness,
  checkReadiness,
  DEFAULT_REDIS_DOWN_MS,
  type HealthThresholds,
  type HealthVerdict,
  type RedisStreamsHealth,
  type StreamHealth,
} from '../health/health.js';
