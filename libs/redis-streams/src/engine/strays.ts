import type { Logger } from '../ports.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { counted } from '../readable.js';

/**
 * Entries under keys no handler reads (see `StreamPlan.strays`): a producer and a consumer that
 * disagree on a stream's partition count. Reported once at start; what is there waits, it is not lost.
 */
export async function warnStrays(
  commands: Pick<StreamCommands, 'streamLength'>,
  strays: ReadonlyMap<string, string>,
  logger: Logger,
): Promise<void> {
  for (const [key, why] of strays) {
    const length = await commands.streamLength(key);
    if (length > 0) {
      logger.warn(
        `stream "${key}" holds ${counted(length, 'entry', 'entries')} that no handler of this consumer reads (${why}): do producers use another partition count?`,
      );
    }
  }
}
