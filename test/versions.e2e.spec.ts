import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { versionProxy } from './support/version-proxy.js';

const redis = useRedis();

const start = useApps();

describe('supported Redis versions', () => {
  it('refuses a server older than Redis 7.0 at start, with a clear error, instead of misreading its replies', async () => {
    const info = await redis.client().info('server');
    const real = /redis_version:(\S+)/.exec(info)![1]!;
    // Valkey keeps its own name and version beside the Redis-compatible one it reports.
    const valkey = /valkey_version:(\S+)/.exec(info)?.[1];
    // Same length as the real version, major 6: what a Redis 6.x server reports.
    const proxy = await versionProxy(redis, real, `6${real.slice(1)}`);
    try {
      await expect(start({ connection: { host: '127.0.0.1', port: proxy.port }, keyPrefix: uniquePrefix() })).rejects.toThrow(
        `nestjs-redis-streams: unsupported server: needs Redis 7.0 or later (Valkey 7.2 or later); the server is ${valkey ? `Valkey ${valkey} (redis_version 6${real.slice(1)})` : `Redis 6${real.slice(1)}`}`,
      );
    } finally {
      await proxy.close();
    }
  });

  it('accepts the server CI runs', async () => {
    const info = await redis.client().info('server');
    const [major] = /redis_version:(\d+)/.exec(info)!.slice(1).map(Number);
    expect(major).toBeGreaterThanOrEqual(7);
    await start({ connection: redis.url, keyPrefix: uniquePrefix() });
  });
});
