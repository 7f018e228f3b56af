import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { versionProxy } from './support/version-proxy.js';
import { captureLogs } from './support/logs.js';
import { waitFor } from './support/wait-for.js';

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

describe('what the server offers of the newer stream commands', () => {
  /** What the server should offer, from its version alone (the transport asks for the commands themselves). */
  async function expected(): Promise<{ name: string; features: string[] }> {
    const info = await redis.client().info('server');
    const version = /redis_version:(\S+)/.exec(info)![1]!;
    const valkey = /valkey_version:(\S+)/.exec(info)?.[1];
    if (valkey) return { name: `Valkey ${valkey} (redis_version ${version})`, features: [] };
    const [major, minor] = version.split('.').map(Number) as [number, number];
    const at = (m: number, n: number) => major > m || (major === m && minor >= n);
    const features = [at(8, 4) && 'claim-on-read', at(8, 2) && 'ack-delete', at(8, 6) && 'idempotent-produce'].filter(
      (f): f is string => typeof f === 'string',
    );
    return { name: `Redis ${version}`, features };
  }

  it('is found at start, logged once, and shown by health()', async () => {
    const logs = captureLogs();
    const app = await start({ connection: redis.url, keyPrefix: uniquePrefix() }, { logger: logs.logger });
    const want = await expected();
    const line = want.features.length > 0 ? `${want.name}: ${want.features.join(', ')}` : `${want.name}: none of the stream commands`;
    await waitFor(() => logs.lines.some((l) => l.includes(line)));
    expect(logs.lines.filter((l) => l.includes(`${want.name}: `))).toHaveLength(1);
    expect((await app.consumer.health()).server).toEqual(want);
  });

  it('newerCommands: false takes the usual path whatever the server offers', async () => {
    const app = await start({ connection: redis.url, keyPrefix: uniquePrefix(), newerCommands: false });
    expect((await app.consumer.health()).server).toEqual({ ...(await expected()), features: [] });
  });
});
