#!/usr/bin/env node
import { Cluster, Redis } from 'ioredis';
import { parseArgs } from 'node:util';
import { describeError } from '../describe-error.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import { describeConnection, isCluster, resolveConnection } from '../options/connection.js';

const USAGE = `usage:
  redis-streams-dlq find    <stream> [--json] [--url redis://…]
  redis-streams-dlq list    <dead-letter-stream> [--count N] [--after ID] [--json] [--url redis://…]
  redis-streams-dlq redrive <dead-letter-stream> (<id> … | --all) [--json] [--url redis://…]

The URL defaults to $REDIS_URL, then redis://127.0.0.1:6379. On a Redis Cluster pass its nodes
instead: --cluster redis://host:port,redis://host:port (or $REDIS_CLUSTER_URLS).
A dead-letter stream is named <stream>:dead ({<stream>}:dead on a cluster when the stream key
has no hash tag) unless the server's deadLetterStream option says otherwise.`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      cluster: { type: 'string' },
      count: { type: 'string', default: '100' },
      after: { type: 'string' },
      all: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, deadStream, ...ids] = positionals;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!command || !deadStream) {
    console.error(USAGE);
    return 2;
  }
  if (!['find', 'list', 'redrive'].includes(command)) {
    console.error(`redis-streams-dlq: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  // Refused like the server's `connection` option refuses it (InvalidOptionError naming the problem).
  const clusterUrls = values.cluster ?? (values.url ? undefined : process.env.REDIS_CLUSTER_URLS);
  const connection = resolveConnection(clusterUrls ? clusterUrls.split(',').map((u) => u.trim()) : (values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
  const redis = isCluster(connection)
    ? new Cluster(connection.cluster, { ...connection.options, lazyConnect: true, clusterRetryStrategy: () => null, redisOptions: { ...connection.options.redisOptions, maxRetriesPerRequest: 1 } })
    : new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  // ioredis rejects connect() with "Connection is closed."; the reason came as an 'error' event.
  let cause: unknown;
  redis.on('error', (err: unknown) => (cause = err));
  try {
    await redis.connect();
  } catch (err) {
    throw new Error(`cannot connect to ${describeConnection(connection)}: ${describeError(cause ?? err)}`);
  }
  const dlq = new DeadLetters(redis);
  try {
    if (command === 'find') {
      const found = await dlq.find(deadStream);
      if (values.json) console.log(JSON.stringify(found));
      else if (found.length === 0) console.log(`no dead-letter stream of "${deadStream}" under the default names`);
      else for (const name of found) console.log(`${name}  ${await dlq.count(name)} entries`);
      return 0;
    }
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
    console.error(`redis-streams-dlq: ${describeError(err)}`);
    process.exit(err instanceof Error && err.name === 'TypeError' && /parseArgs|Unknown option/i.test(err.message) ? 2 : 1);
  },
);
