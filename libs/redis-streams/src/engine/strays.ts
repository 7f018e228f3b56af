import type { Logger } from '../ports.js';
import type { RedisConnection } from '../redis/connect.js';
import { counted } from '../readable.js';

/**
 * Entries under keys no handler reads (see `StreamPlan.strays`): a producer and a consumer that
 * disagree on a stream's partition count. Reported once at start; what is there waits, it is not lost.
 */
export async function warnStrays(conn: RedisConnection, strays: ReadonlyMap<string, string>, logger: Logger): Promise<void> {
  for (const [key, why] of strays) {
    const length = await conn.xlen(key).catch(() => 0);
    if (length > 0) {
      logger.warn(
        `stream "${key}" holds ${counted(length, 'entry', 'entries')} that no handler of this consumer reads (${why}): do producers use another partition count?`,
      );
    }
  }
}
