import type { RedisStreamsServerOptions } from 'nestjs-redis-streams';
import type { TestRedis } from './redis-server.js';
import { uniquePrefix } from './test-app.js';

/**
 * A consumer's options as most tests give them: the file's server, group `g` and a key prefix of the
 * test's own, `options` over those (blockMs, consumer, a keyPrefix shared with a peer…).
 */
export function consumerOptions(redis: TestRedis, options: Partial<RedisStreamsServerOptions> = {}): RedisStreamsServerOptions {
  return { connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), ...options };
}
