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
// Types the API above names in its signatures: exported so that users can name them too.
export type { PatternHealth, StreamOrdering } from '../health/health.js';
export type { FeatureName } from '../redis/server-features.js';
export { FEATURE_NAMES } from '../redis/server-features.js';
export type { StreamDurability } from '../health/health.js';
