#!/usr/bin/env node
// redis-streams-dlq: the dead-letter commands alone (also `redis-streams dlq …`).
import { parseArgs } from 'node:util';
import { escapeControl } from '../escape-control.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import { CONNECTION_FLAGS, CONNECTION_HELP, connect, runMain } from './cli-connection.js';
import { DLQ_COMMANDS, DLQ_FLAGS, DLQ_NAMING, DLQ_USAGE, runDlq } from './dlq-command.js';

const USAGE = `usage:
  redis-streams-dlq ${DLQ_USAGE.replaceAll('\n  ', '\n  redis-streams-dlq ')}
  (each with [--url redis://…] or [--cluster redis://…,…])

${CONNECTION_HELP}
${DLQ_NAMING}`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...CONNECTION_FLAGS,
      ...DLQ_FLAGS,
    },
  });
  const [command, target, ...ids] = positionals;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!command || !target) {
    console.error(USAGE);
    return 2;
  }
  if (!DLQ_COMMANDS.includes(command)) {
    console.error(`redis-streams-dlq: unknown command "${escapeControl(command)}"\n\n${USAGE}`);
    return 2;
  }
  const redis = await connect(values);
  try {
    return await runDlq(redis, new DeadLetters(redis), command, target, ids, values);
  } finally {
    redis.disconnect();
  }
}

runMain('redis-streams-dlq', main, USAGE);
