import { Redis } from 'ioredis';
import { startRedisServer } from '../../scripts/lib/redis-server.mjs';
import { detectServerFeatures, type ServerFeatures } from '../../libs/redis-streams/src/redis/server-features.js';

/**
 * What the server a test file will run on offers of the newer stream commands, known while the file is
 * collected (for `describe.runIf`): REDIS_URL's server, or a throwaway one of the binary the file's own
 * will be (REDIS_SERVER_BIN), asked the way the transport asks (redis/server-features.ts).
 */
export async function probeServerFeatures(): Promise<ServerFeatures> {
  const server = process.env.REDIS_URL ? undefined : await startRedisServer();
  const conn = new Redis(process.env.REDIS_URL ?? server!.url, { maxRetriesPerRequest: 1 });
  try {
    return await detectServerFeatures(conn);
  } finally {
    conn.disconnect();
    await server?.stop();
  }
}
