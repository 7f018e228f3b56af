import { fieldsToRecord } from '../codec/entry-codec.js';
import { deadLetterSources } from '../dlq/dead-letter-source.js';
import type { DeadLetters } from '../dlq/dead-letters.js';
import { escapeControl as e } from '../escape-control.js';
import { clusterDeadLetterStream, defaultDeadLetterStream } from '../options/server-options.js';
import type { RedisConnection } from '../redis/connect.js';
import { UsageError } from './cli-connection.js';

/** Fields every letter the library writes carries (codec/dead-letter-codec.ts). */
const LETTER_FIELDS = ['stream', 'sourceId', 'error'];

/**
 * Refuses (a usage error, exit 2) a key that is not a dead-letter stream, before a dead-letter
 * command reads or deletes anything: `dlq list orders` (`:dead` forgotten) would show work entries
 * as letters dated 1970, `dlq delete orders --all --yes` would delete the work. A dead-letter stream is a key
 * named as the defaults name them (dead-letter-source.ts) or, for a custom `deadLetterStream`, one
 * whose oldest entry has the letter fields; an empty or missing key is fine.
 */
export async function requireDeadLetterStream(redis: RedisConnection, dlq: DeadLetters, key: string): Promise<void> {
  if (deadLetterSources(key).length > 0) return;
  const [oldest] = await redis.xrange(key, '-', '+', 'COUNT', 1);
  if (!oldest) return;
  const fields = fieldsToRecord(oldest[1]);
  if (LETTER_FIELDS.every((f) => fields[f] !== undefined)) return;
  const cluster = (redis as { isCluster?: boolean }).isCluster === true;
  const [found] = await dlq.find(key);
  const suggested = found ?? (cluster ? clusterDeadLetterStream(key) : defaultDeadLetterStream(key));
  throw new UsageError(
    `"${e(key)}" is not a dead-letter stream (its name is not <stream>:dead and its entries lack the fields of a dead letter: ${LETTER_FIELDS.join(', ')}): did you mean "${e(suggested)}"?`,
  );
}

/** A stream entry id (`ms` or `ms-seq`); Redis would refuse anything else with a failure, not a usage error. */
export function requireEntryId(flag: string, raw: string): string {
  if (!/^\d+(-\d+)?$/.test(raw)) throw new UsageError(`${flag} must be a stream entry id (ms-seq), got "${e(raw)}"`);
  return raw;
}
