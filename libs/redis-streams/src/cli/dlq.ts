#!/usr/bin/env node
import { Redis } from 'ioredis';
import { parseArgs } from 'node:util';
import { DeadLetters } from '../dlq/dead-letters.js';

const USAGE = `usage:
  redis-streams-dlq list    <dead-letter-stream> [--count N] [--after ID] [--json] [--url redis://…]
  redis-streams-dlq redrive <dead-letter-stream> (<id> … | --all) [--json] [--url redis://…]

The URL defaults to $REDIS_URL, then redis://127.0.0.1:6379. A dead-letter stream is named
<stream>:dead unless the server's deadLetterStream option says otherwise.`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      count: { type: 'string', default: '100' },
      after: { type: 'string' },
      all: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, deadStream, ...ids] = positionals;
  if (values.help || !command || !deadStream || !['list', 'redrive'].includes(command)) {
    console.error(USAGE);
    return values.help ? 0 : 2;
  }
  const redis = new Redis(values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => {});
  const dlq = new DeadLetters(redis);
  try {
    if (command === 'list') {
      const count = Number(values.count);
      if (!Number.isSafeInteger(count) || count <= 0) throw new Error(`--count must be a positive integer, got ${values.count}`);
      const letters = await dlq.list(deadStream, { count, ...(values.after ? { after: values.after } : {}) });
      if (values.json) letters.forEach((d) => console.log(JSON.stringify(d)));
      else {
        console.log(`${await dlq.count(deadStream)} entries in "${deadStream}"${letters.length ? ', oldest first:' : ''}`);
        for (const d of letters) {
          console.log(`${d.id}  ${d.stream} ${d.sourceId}  delivery ${d.deliveryCount}  ${new Date(d.deadAt).toISOString()}  ${d.error}`);
          console.log(`    ${JSON.stringify(d.fields)}`);
        }
      }
      return 0;
    }
    if (ids.length === 0 && !values.all) throw new Error('redrive needs ids or --all');
    const results = await dlq.redrive(deadStream, values.all ? 'all' : ids);
    for (const r of results) {
      if (values.json) console.log(JSON.stringify(r));
      else console.log(r.newId ? `${r.id} → ${r.stream} ${r.newId}` : `${r.id}: skipped (no longer in "${deadStream}", or its fields were not copied)`);
    }
    return results.every((r) => r.newId) ? 0 : 1;
  } finally {
    redis.disconnect();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`redis-streams-dlq: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
