import type { DeadLetters } from '../dlq/dead-letters.js';
import { escapeControl as e, safeJson } from '../escape-control.js';

export const DLQ_USAGE = `find    <stream> [--json]
  list    <dead-letter-stream> [--count N] [--after ID] [--json]
  redrive <dead-letter-stream> (<id> … | --all) [--to <stream>] [--json]`;

export const DLQ_NAMING = `A dead-letter stream is named <stream>:dead ({<stream>}:dead on a cluster when the stream key
has no hash tag) unless the server's deadLetterStream option says otherwise. redrive writes only to
the stream whose dead-letter stream it reads (from those names, or --to for a custom name): a letter
naming another stream is skipped, and a request is re-driven as an event (replyTo/correlationId dropped).`;

export const DLQ_COMMANDS = ['find', 'list', 'redrive'];

/** The flags of the dead-letter commands (both binaries). */
export const DLQ_FLAGS = {
  count: { type: 'string', default: '100' },
  after: { type: 'string' },
  to: { type: 'string' },
  all: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** `find` / `list` / `redrive` of dead letters; returns the exit code. Every column a producer or a forged letter could write is escaped (`e`). */
export async function runDlq(
  dlq: DeadLetters,
  command: string,
  target: string,
  ids: string[],
  values: { count: string; after?: string; to?: string; all: boolean; json: boolean },
): Promise<number> {
  if (command === 'find') {
    const found = await dlq.find(target);
    if (values.json) console.log(safeJson(found));
    else if (found.length === 0) console.log(`no dead-letter stream of "${e(target)}" under the default names`);
    else for (const name of found) console.log(`${e(name)}  ${await dlq.count(name)} entries`);
    return 0;
  }
  if (command === 'list') {
    const count = Number(values.count);
    if (!Number.isSafeInteger(count) || count <= 0) throw new Error(`--count must be a positive integer, got ${values.count}`);
    const letters = await dlq.list(target, { count, ...(values.after ? { after: values.after } : {}) });
    if (values.json) letters.forEach((d) => console.log(safeJson(d)));
    else {
      console.log(`${await dlq.count(target)} entries in "${e(target)}"${letters.length ? ', oldest first:' : ''}`);
      for (const d of letters) {
        console.log(`${e(d.id ?? '')}  ${e(d.stream)} ${e(d.sourceId)}  delivery ${d.deliveryCount}  ${deadAt(d.deadAt)}  ${e(d.error)}`);
        console.log(`    ${safeJson(d.fields)}`);
      }
    }
    return 0;
  }
  if (ids.length === 0 && !values.all) throw new Error('redrive needs ids or --all');
  const results = await dlq.redrive(target, values.all ? 'all' : ids, values.to === undefined ? {} : { stream: values.to });
  for (const r of results) {
    if (values.json) console.log(safeJson(r));
    else if (r.newId) console.log(`${e(r.id)} → ${e(r.stream)} ${r.newId}${r.skipped ? `: ${e(r.skipped)}` : ''}`);
    else console.log(`${e(r.id)}: skipped (${e(r.skipped ?? 'not re-driven')})`);
  }
  return results.every((r) => r.newId && !r.skipped) ? 0 : 1;
}

/** A forged `deadAt` is not a date: shown as it is rather than failing the listing (toISOString throws). */
function deadAt(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}
