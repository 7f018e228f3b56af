import { encodeDeadLetterHead } from '../codec/dead-letter-codec.js';
import { escapeControl as e, safeJson } from '../escape-control.js';
import { clusterDeadLetterStream, defaultDeadLetterStream } from '../options/server-options.js';
import type { RedisConnection } from '../redis/connect.js';
import { parsePendingDetail, type PendingRow } from '../redis/replies.js';
import { StreamCommands } from '../redis/stream-commands.js';
import { positiveFlag, UsageError } from './cli-connection.js';
import { requireEntryId } from './dead-letter-guard.js';

export const PENDING_USAGE = `peek        <stream> --group G <id> [--json]
  release     <stream> --group G <id> [--min-idle-ms MS] [--json]
  dead-letter <stream> --group G <id> [--to <dead-letter-stream>] [--json]`;

export const PENDING_HELP = `pending peek: one pending entry's owner, idle time, delivery count and fields (escaped).
pending release: sets its idle time to --min-idle-ms (default 30000, the server's minIdleMs
default), owner and delivery count unchanged, so the next peer that beats reclaims it; it never
leaves the pending list, so nothing is lost. An owner still handling it keeps it (its lease resets
the idle time). pending dead-letter: moves it to the dead-letter stream (<stream>:dead, or --to)
and acks it in one script, the library's own, only while its owner still holds it.`;

export const PENDING_COMMANDS = ['peek', 'release', 'dead-letter'];

type PendingFlags = { group?: string; 'min-idle-ms'?: string; to?: string; json: boolean };

/** `pending peek | release | dead-letter <stream> --group G <id>`; returns the exit code. */
export async function runPending(redis: RedisConnection, sub: string, stream: string, id: string, values: PendingFlags): Promise<number> {
  const group = values.group!;
  const minIdleMs = positiveFlag('--min-idle-ms', values['min-idle-ms'] ?? '30000');
  const row = await pendingRow(redis, stream, group, id);
  const commands = new StreamCommands(redis, group);
  if (sub === 'peek') {
    const [entry] = await redis.xrange(stream, id, id);
    const fields = entry ? entry[1] : null;
    if (values.json)
      console.log(safeJson({ stream, group, id, owner: row.consumer, idleMs: row.idleMs, deliveries: row.deliveryCount, fields }));
    else {
      console.log(`${id}  owner ${e(row.consumer)}  idle ${row.idleMs} ms  deliveries ${row.deliveryCount}`);
      console.log(`    ${fields ? safeJson(fields) : '(no longer in the stream: trimmed or deleted)'}`);
    }
    return 0;
  }
  if (sub === 'release') {
    const [released] = await commands.setIdle(stream, row.consumer, [id], minIdleMs);
    if (!released) throw new Error(`${id} changed hands meanwhile (no longer pending under "${e(row.consumer)}"): nothing done`);
    console.log(
      values.json
        ? safeJson({ stream, group, id, owner: row.consumer, idleMs: minIdleMs })
        : `${id} released: idle ${minIdleMs} ms, still pending under "${e(row.consumer)}", taken by the next peer that beats`,
    );
    return 0;
  }
  return deadLetterByHand(redis, commands, stream, group, id, row, values);
}

async function deadLetterByHand(
  redis: RedisConnection,
  commands: StreamCommands,
  stream: string,
  group: string,
  id: string,
  row: PendingRow & { idleMs: number },
  values: PendingFlags,
): Promise<number> {
  const cluster = (redis as { isCluster?: boolean }).isCluster === true;
  const dead = values.to ?? (cluster ? clusterDeadLetterStream(stream) : defaultDeadLetterStream(stream));
  const head = encodeDeadLetterHead({
    stream,
    sourceId: id,
    group,
    consumer: row.consumer,
    deliveryCount: row.deliveryCount,
    error: 'dead-lettered by hand (redis-streams pending dead-letter)',
    deadAt: Date.now(),
  });
  const deadLetterId = await commands.deadLetter(stream, dead, row.consumer, id, head, true);
  if (deadLetterId === null) throw new Error(`${id} changed hands meanwhile (no longer pending under "${e(row.consumer)}"): nothing done`);
  console.log(
    values.json
      ? safeJson({ stream, group, id, deadLetterStream: dead, deadLetterId })
      : `${id} → ${e(dead)} ${deadLetterId} (acked in "${e(stream)}")`,
  );
  return 0;
}

/** Checks the usage before anything is read: a stream, --group and an id. */
export function requirePendingArgs(sub: string | undefined, stream: string | undefined, id: string | undefined, group?: string): void {
  const missing = [
    ...(sub && PENDING_COMMANDS.includes(sub) ? [] : [`one of ${PENDING_COMMANDS.join(', ')}`]),
    ...(stream ? [] : ['a stream']),
    ...(group ? [] : ['--group G']),
    ...(id ? [] : ['an entry id']),
  ];
  if (missing.length > 0) throw new UsageError(`pending needs ${missing.join(' and ')}`);
  requireEntryId('the entry id', id!);
}

async function pendingRow(redis: RedisConnection, stream: string, group: string, id: string): Promise<PendingRow & { idleMs: number }> {
  const row = parsePendingDetail(id, await redis.xpending(stream, group, id, id, 1));
  if (!row) throw new Error(`${id} is not pending in group "${e(group)}" of "${e(stream)}"`);
  return row;
}
