/**
 * RateLimitNotice (consumer/upkeep/rate-limit-notice.ts): the limits written for the dashboard, and what its line says
 * when a write fails, on a real Redis: the ACL hint only for a refusal of rights, not for a server that did not answer.
 */
import { Redis } from 'ioredis';
import { RateLimitNotice } from '../libs/redis-streams/src/consumer/upkeep/rate-limit-notice.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { freezeServer } from './support/freeze.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis({ standalone: true });

/** A notice of one limited pattern on `conn`, its lines collected. */
function notice(conn: Redis): { lines: string[]; stop: () => Promise<void> } {
  const lines: string[] = [];
  const logger = { log: () => undefined, warn: (m: string) => void lines.push(m), error: (m: string) => void lines.push(m) };
  const n = new RateLimitNotice({
    limits: new Map([[`${uniquePrefix()}jobs`, { max: 10, perMs: 1000 }]]),
    commands: new StreamCommands(conn, 'g').rateLimits,
    everyMs: 200,
    ttlMs: 3000,
    logger: logger as never,
  });
  return { lines, stop: () => n.stop() };
}

describe.skipIf(CLUSTER_MODE)('RateLimitNotice: what a failed write says', () => {
  it('a server that does not answer: the error, without the ACL hint (review-g)', async () => {
    const conn = new Redis({ host: '127.0.0.1', port: redis.port, commandTimeout: 300, maxRetriesPerRequest: 1 });
    const { lines, stop } = notice(conn);
    const thaw = await freezeServer(redis.newClient());
    try {
      await waitFor(() => lines.length > 0, { message: 'the failed write said' });
    } finally {
      thaw();
    }
    await stop();
    conn.disconnect();
    expect(lines[0]).toMatch(/could not write the rate limits for the dashboard.*Command timed out/);
    expect(lines[0]).not.toMatch(/\+hset/);
  });

  it('a user without the rights: the error and the rights it needs', async () => {
    const user = `n-${uniquePrefix().slice(2, 10)}`;
    await redis.client().call('ACL', 'SETUSER', user, 'reset', 'on', '>pw', '~*', '+@all', '-hset');
    const conn = new Redis({ host: '127.0.0.1', port: redis.port, username: user, password: 'pw' });
    const { lines, stop } = notice(conn);
    await waitFor(() => lines.length > 0, { message: 'the failed write said' });
    await stop();
    conn.disconnect();
    await redis.client().call('ACL', 'DELUSER', user);
    expect(lines[0]).toMatch(/could not write the rate limits for the dashboard.*the consumer needs \+hset \+pexpire/);
  });
});
