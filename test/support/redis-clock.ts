import type { Cluster, Redis } from 'ioredis';

/** Redis' clock in whole ms (TIME): what due times, windows and idle times are measured on. */
export async function redisNow(redis: Redis | Cluster): Promise<number> {
  const [s, us] = (await redis.time()) as [string | number, string | number];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}
