import { escapeControl as e, safeJson } from '../escape-control.js';
import { PendingActions } from '../ops/pending-actions.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import { positiveFlag, UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';
import { requireDeadLetterTarget, requireEntryId } from './dead-letter-guard.js';

export const PENDING_USAGE = `peek        <stream> --group G <id> [--json]
  release     <stream> --group G <id> [--min-idle-ms MS] [--force] [--json]
  dead-letter <stream> --group G <id> [--to <dead-letter-stream> [--custom-dlq]] [--force] [--json]`;

export const PENDING_HELP = `pending peek: one pending entry's owner, idle time, delivery count and fields (escaped).
pending release: sets its idle time to --min-idle-ms (default 30000, the server's minIdleMs
default), owner and delivery count unchanged, so the next peer that beats reclaims it; it never
leaves the pending list, so nothing is lost. pending dead-letter: moves it to the dead-letter
stream (<stream>:dead, or --to, which must be so named unless --custom-dlq) and acks it in one
script, the library's own, only while its owner still holds it; an entry no longer in the stream
is refused (its letter would carry no fields) unless --force. Both refuse (exit 1) while the owner
has a connection open, since it may still be handling the entry: released, a peer would handle it a
second time; dead-lettered, it would be both handled and dead-lettered. --force does it anyway.`;

export const PENDING_COMMANDS = ['peek', 'release', 'dead-letter'];

type PendingFlags = { group?: string; 'min-idle-ms'?: string; to?: string; 'custom-dlq': boolean; force: boolean; json: boolean };

/** `pending peek | release | dead-letter <stream> --group G <id>`; returns the exit code. */
export async function runPending(
  redis: RedisConnection,
  sub: string,
  stream: string,
  id: string,
  values: PendingFlags,
  io: CliIo,
): Promise<number> {
  const group = values.group!;
  const minIdleMs = positiveFlag('--min-idle-ms', values['min-idle-ms'] ?? '30000');
  if (sub === 'dead-letter' && values.to !== undefined) requireDeadLetterTarget(values.to, values['custom-dlq']);
  const actions = new PendingActions(redis);
  const target = { stream, group, id };
  if (sub === 'peek') {
    const row = await actions.row(target);
    const fields = await new ReportCommands(redis).entryFields(stream, id);
    if (values.json)
      io.out(safeJson({ stream, group, id, owner: row.consumer, idleMs: row.idleMs, deliveries: row.deliveryCount, fields }));
    else {
      io.out(`${id}  owner ${e(row.consumer)}  idle ${row.idleMs} ms  deliveries ${row.deliveryCount}`);
      io.out(`    ${fields ? safeJson(fields) : '(no longer in the stream: trimmed or deleted)'}`);
    }
    return 0;
  }
  if (sub === 'release') {
    const row = await actions.release(target, minIdleMs, values.force);
    io.out(
      values.json
        ? safeJson({ stream, group, id, owner: row.consumer, idleMs: minIdleMs })
        : `${id} released: idle ${minIdleMs} ms, still pending under "${e(row.consumer)}", taken by the next peer that beats`,
    );
    return 0;
  }
  const moved = await actions.deadLetter(target, {
    force: values.force,
    forceGone: values.force,
    ...(values.to !== undefined ? { to: values.to } : {}),
    by: 'redis-streams pending dead-letter',
  });
  io.out(
    values.json
      ? safeJson({ stream, group, id, deadLetterStream: moved.deadLetterStream, deadLetterId: moved.deadLetterId })
      : `${id} → ${e(moved.deadLetterStream)} ${moved.deadLetterId} (acked in "${e(stream)}")`,
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
