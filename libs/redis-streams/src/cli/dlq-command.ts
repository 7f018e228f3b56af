import type { DeadLetters } from '../dlq/dead-letters.js';

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

/** `find` / `list` / `redrive` of dead letters; returns the exit code. */
export async function runDlq(
  dlq: DeadLetters,
  command: string,
  target: string,
  ids: string[],
  values: { count: string; after?: string; to?: string; all: boolean; json: boolean },
): Promise<number> {
  if (command === 'find') {
    const found = await dlq.find(target);
    if (values.json) console.log(JSON.stringify(found));
    else if (found.length === 0) console.log(`no dead-letter stream of "${target}" under the default names`);
    else for (const name of found) console.log(`${name}  ${await dlq.count(name)} entries`);
    return 0;
  }
  if (command === 'list') {
    const count = Number(values.count);
    if (!Number.isSafeInteger(count) || count <= 0) throw new Error(`--count must be a positive integer, got ${values.count}`);
    const letters = await dlq.list(target, { count, ...(values.after ? { after: values.after } : {}) });
    if (values.json) letters.forEach((d) => console.log(JSON.stringify(d)));
    else {
      console.log(`${await dlq.count(target)} entries in "${target}"${letters.length ? ', oldest first:' : ''}`);
      for (const d of letters) {
        console.log(`${d.id}  ${d.stream} ${d.sourceId}  delivery ${d.deliveryCount}  ${new Date(d.deadAt).toISOString()}  ${d.error}`);
        console.log(`    ${JSON.stringify(d.fields)}`);
      }
    }
    return 0;
  }
  if (ids.length === 0 && !values.all) throw new Error('redrive needs ids or --all');
  const results = await dlq.redrive(target, values.all ? 'all' : ids, values.to === undefined ? {} : { stream: values.to });
  for (const r of results) {
    if (values.json) console.log(JSON.stringify(r));
    // JSON quoting: a key or reason cannot put control characters on the operator's terminal.
    else console.log(r.newId ? `${r.id} → ${JSON.stringify(r.stream)} ${r.newId}` : `${r.id}: skipped (${JSON.stringify(r.skipped ?? 'not re-driven').slice(1, -1)})`);
  }
  return results.every((r) => r.newId) ? 0 : 1;
}
