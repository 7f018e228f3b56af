import { fieldsToRecord } from '../codec/entry-codec.js';
import { deadLetterSourcesOf } from '../key-names.js';
import type { DeadLetters } from '../dlq/dead-letters.js';
import { escapeControl as e } from '../escape-control.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import { UsageError } from './cli-connection.js';

/** Fields every letter the library writes carries (codec/dead-letter-codec.ts). */
const LETTER_FIELDS = ['stream', 'sourceId', 'error'];

/** The flag that says a key not named `<stream>:dead` is a dead-letter stream (a custom `deadLetterStream`). */
export const CUSTOM_DLQ_FLAG = '--custom-dlq';

/**
 * Refuses (a usage error, exit 2) a key that is not a dead-letter stream, before a dead-letter
 * command reads or deletes anything: `dlq list orders` (`:dead` forgotten) would show work entries
 * as letters dated 1970, `dlq delete orders --all --yes` would delete the work. A dead-letter stream
 * is a key named as the defaults name them (key-names.ts), or one the operator says is
 * (--custom-dlq). Content decides nothing destructive (a producer may write any field): only
 * `list` also takes a key whose oldest entry has the letter fields. An empty or missing key is fine.
 */
export async function requireDeadLetterStream(
  redis: RedisConnection,
  dlq: DeadLetters,
  key: string,
  how: { destructive: boolean; custom: boolean },
): Promise<void> {
  if (how.custom || deadLetterSourcesOf(key).length > 0) return;
  const oldest = await new ReportCommands(redis).oldestFields(key);
  if (!oldest) return;
  const fields = fieldsToRecord(oldest);
  if (!how.destructive && LETTER_FIELDS.every((f) => fields[f] !== undefined)) return;
  const [found] = await dlq.find(key);
  const content = how.destructive ? '' : ` and its oldest entry lacks the fields of a dead letter (${LETTER_FIELDS.join(', ')})`;
  throw new UsageError(
    `"${e(key)}" is not a dead-letter stream: its name is not <stream>:dead${content}${found === undefined ? '' : `; did you mean "${e(found)}"?`}` +
      ` If it is one under a custom name (the server's deadLetterStream option), add ${CUSTOM_DLQ_FLAG}.`,
  );
}

/** A --to for dead letters: named as the defaults name them, or the operator says it is one (--custom-dlq). */
export function requireDeadLetterTarget(to: string, custom: boolean): void {
  if (custom || deadLetterSourcesOf(to).length > 0) return;
  throw new UsageError(
    `--to "${e(to)}" is not a dead-letter stream: its name is not <stream>:dead. If it is one under a custom name, add ${CUSTOM_DLQ_FLAG}.`,
  );
}

const MAX_ID_PART = 2n ** 64n - 1n;

/** A stream entry id (`ms` or `ms-seq`, each at most 2^64-1); Redis would refuse anything else with a failure, not a usage error. */
export function requireEntryId(flag: string, raw: string): string {
  const parts = /^(\d+)(?:-(\d+))?$/.exec(raw);
  if (!parts || BigInt(parts[1]!) > MAX_ID_PART || BigInt(parts[2] ?? 0) > MAX_ID_PART)
    throw new UsageError(`${flag} must be a stream entry id (ms-seq, each at most 2^64-1), got "${e(raw)}"`);
  return raw;
}
