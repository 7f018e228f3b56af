import type { DeadLetters, RedriveResult } from '../dlq/dead-letters.js';
import { escapeControl as e, safeJson } from '../escape-control.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { isWrongType } from '../redis/replies/redis-errors.js';
import { positiveFlag, UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';
import { requireDeadLetterStream, requireEntryId } from './dead-letter-guard.js';
import { counted } from '../readable.js';

export const DLQ_USAGE = `find    <stream> [--json]
  list    <dead-letter-stream> [--count N] [--after ID] [--custom-dlq] [--json]
  redrive <dead-letter-stream> (<id> … | --all) [--to <stream>] [--custom-dlq] [--json]
  delete  <dead-letter-stream> (<id> … | --all --yes) [--custom-dlq] [--json]`;

export const DLQ_NAMING = `A dead-letter stream is named <stream>:dead ({<stream>}:dead on a cluster when the stream key
has no hash tag; {<stream>}/dead where that name is taken, docs/wire-format.md) unless the server's deadLetterStream
option says otherwise. redrive writes only to
the stream whose dead-letter stream it reads (from those names, or --to for a custom name): a letter
naming another stream is skipped, and a request is re-driven as an event (replyTo/correlationId dropped).
list, redrive and delete refuse (exit 2) a key not so named unless --custom-dlq says it is a
dead-letter stream under a custom name (list also takes one whose oldest entry is a letter; what a
key holds never authorises redrive or delete: a producer may write any field). Ids and --all do not
go together. delete --all deletes every letter only with --yes, and without it says how many it would delete.`;

export const DLQ_COMMANDS = ['find', 'list', 'redrive', 'delete'];

/** The flags of the dead-letter commands (both binaries). */
export const DLQ_FLAGS = {
  count: { type: 'string', default: '100' },
  after: { type: 'string' },
  to: { type: 'string' },
  all: { type: 'boolean', default: false },
  yes: { type: 'boolean', default: false },
  'custom-dlq': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

type DlqFlags = { count: string; after?: string; to?: string; all: boolean; yes: boolean; 'custom-dlq': boolean; json: boolean };

/**
 * The usage errors of `list` / `redrive` / `delete`, checked before connecting (a refused connection
 * must not hide them); returns `list`'s count.
 */
export function checkDlqArgs(command: string, ids: readonly string[], values: Pick<DlqFlags, 'count' | 'after' | 'all'>): number {
  if (command === 'find') return 0;
  const count = command === 'list' ? positiveFlag('--count', values.count) : 0;
  if (values.after !== undefined) requireEntryId('--after', values.after);
  for (const id of ids) requireEntryId('an id', id);
  if (command === 'redrive' && ids.length === 0 && !values.all) throw new UsageError('redrive needs ids or --all');
  if (command === 'delete' && ids.length === 0 && !values.all) throw new UsageError('delete needs ids or --all --yes');
  if (ids.length > 0 && values.all) throw new UsageError(`${command} takes ids or --all, not both`);
  return count;
}

/**
 * `find` / `list` / `redrive` / `delete` of dead letters; returns the exit code. Its arguments
 * were checked by {@link checkDlqArgs}, before connecting. Every column a producer or a forged letter could
 * write is escaped (`e`).
 */
export async function runDlq(
  redis: RedisConnection,
  dlq: DeadLetters,
  command: string,
  target: string,
  ids: string[],
  values: DlqFlags,
  io: CliIo,
): Promise<number> {
  if (command === 'find') return find(dlq, target, values.json, io);
  const count = command === 'list' ? positiveFlag('--count', values.count) : 0;
  try {
    await requireDeadLetterStream(redis, dlq, target, { destructive: command !== 'list', custom: values['custom-dlq'] });
    if (command === 'list') return await list(dlq, target, count, values, io);
    if (command === 'redrive') return await redrive(dlq, target, ids, values, io);
    if (values.all) return await deleteAll(dlq, target, values, io);
    return await remove(dlq, target, ids, values.json, io);
  } catch (err) {
    // Redis' WRONGTYPE names no key.
    if (isWrongType(err)) throw new Error(`"${e(target)}" is not a stream: ${(err as Error).message}`, { cause: err });
    throw err;
  }
}

async function find(dlq: DeadLetters, target: string, json: boolean, io: CliIo): Promise<number> {
  const found = await dlq.find(target);
  if (json) io.out(safeJson(found));
  else if (found.length === 0) io.out(`no dead-letter stream of "${e(target)}" under the default names`);
  else for (const name of found) io.out(`${e(name)}  ${await described(dlq, name)}`);
  return 0;
}

/** A found key's length, or what it is when it is no stream (a key of that name is never hidden). */
async function described(dlq: DeadLetters, name: string): Promise<string> {
  try {
    return counted(await dlq.count(name), 'entry', 'entries');
  } catch (err) {
    if (!isWrongType(err)) throw err;
    return `not a stream (${await dlq.typeOf(name)}): nothing can be dead-lettered there`;
  }
}

/** Stack lines printed per letter: the library keeps at most 4,000 characters, a forged letter may hold more. */
const STACK_LINES = 60;

async function list(dlq: DeadLetters, target: string, count: number, values: DlqFlags, io: CliIo): Promise<number> {
  const letters = await dlq.list(target, { count, ...(values.after ? { after: values.after } : {}) });
  if (values.json) letters.forEach((d) => io.out(safeJson(d)));
  else {
    io.out(`${counted(await dlq.count(target), 'entry', 'entries')} in "${e(target)}"${letters.length ? ', oldest first:' : ''}`);
    for (const d of letters) {
      io.out(`${e(d.id ?? '')}  ${e(d.stream)} ${e(d.sourceId)}  delivery ${d.deliveryCount}  ${deadAt(d.deadAt)}  ${e(d.error)}`);
      // Escaped again and bounded: a letter is anyone's to write, not only the library's (--json has it whole).
      const lines = d.stack?.split('\n') ?? [];
      for (const line of lines.slice(0, STACK_LINES)) io.out(`    | ${e(line.slice(0, 500))}`);
      if (lines.length > STACK_LINES) io.out(`    | … ${lines.length - STACK_LINES} more lines (--json prints them)`);
      io.out(`    ${safeJson(d.fields)}`);
    }
  }
  return 0;
}

async function redrive(dlq: DeadLetters, target: string, ids: string[], values: DlqFlags, io: CliIo): Promise<number> {
  let done = 0;
  // Printed as each letter moves: a redrive cut short (no answer, a lost connection) has said what it did.
  const print = (r: RedriveResult) => {
    done++;
    if (values.json) io.out(safeJson(r));
    else if (r.newId) io.out(`${e(r.id)} → ${e(r.stream)} ${r.newId}${r.skipped ? `: ${e(r.skipped)}` : ''}`);
    else io.out(`${e(r.id)}: skipped (${e(r.skipped ?? 'not re-driven')})`);
  };
  const stream = values.to === undefined ? {} : { stream: values.to };
  const results = await dlq.redrive(target, values.all ? 'all' : ids, { ...stream, onResult: print }).catch((err: unknown) => {
    if (done === 0) throw err;
    const said = (err instanceof Error ? err.message : String(err)).replace(/\.$/, '');
    throw new Error(`${said}: ${done} re-driven (above); the next letter may or may not have moved`, { cause: err });
  });
  return results.every((r) => r.newId && !r.skipped) ? 0 : 1;
}

/** Exit 1 when some id was not there: the operator meant a letter that is not (a typo, or deleted already). */
async function remove(dlq: DeadLetters, target: string, ids: string[], json: boolean, io: CliIo): Promise<number> {
  const deleted = new Set(await dlq.delete(target, ids));
  for (const id of ids) {
    if (json) io.out(safeJson({ id, deleted: deleted.has(id) }));
    else io.out(deleted.has(id) ? `${id} deleted` : `${id} not in "${e(target)}"`);
  }
  return deleted.size === new Set(ids).size ? 0 : 1;
}

/** Destructive: without --yes it only says how many letters it would delete (exit 2). */
async function deleteAll(dlq: DeadLetters, target: string, values: DlqFlags, io: CliIo): Promise<number> {
  if (!values.yes)
    throw new UsageError(
      `delete --all deletes ${counted(await dlq.count(target), 'dead letter', 'dead letters')} of "${e(target)}": add --yes to confirm`,
    );
  const deleted = await dlq.purge(target);
  io.out(
    values.json ? safeJson({ stream: target, deleted }) : `deleted ${counted(deleted, 'dead letter', 'dead letters')} from "${e(target)}"`,
  );
  return 0;
}

/** A forged `deadAt` is not a date: shown as it is rather than failing the listing (toISOString throws). */
function deadAt(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}
