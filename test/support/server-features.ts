import { detectServerFeatures, type ServerFeatures } from '../../libs/redis-streams/src/redis/server-features.js';
import type { TestRedis } from './redis-server.js';

/** What the test's server offers of the newer stream commands, as the transport finds it (one place: redis/server-features.ts). */
export function serverFeatures(redis: Pick<TestRedis, 'client'>): Promise<ServerFeatures> {
  return detectServerFeatures(redis.client());
}
