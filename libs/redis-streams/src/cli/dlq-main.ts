// The `redis-streams-dlq` command (bin: dlq.ts): the dead-letter commands alone (also `redis-streams dlq …`).
import { parseArgs } from 'node:util';
import { escapeControl } from '../escape-control.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import { CONNECTION_FLAGS, CONNECTION_HELP, withConnection } from './cli-connection.js';
import type { CliIo } from './cli-io.js';
import { DLQ_COMMANDS, DLQ_FLAGS, DLQ_NAMING, DLQ_USAGE, runDlq } from './dlq-command.js';

export const DLQ_BIN_USAGE = `usage:
  redis-streams-dlq ${DLQ_USAGE.replaceAll('\n  ', '\n  redis-streams-dlq ')}
  (each with [--url redis://…] or [--cluster redis://…,…])

${CONNECTION_HELP}
${DLQ_NAMING}`;

export async function dlqMain(argv: string[], io: CliIo): Promise<number> {
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
    io.out(DLQ_BIN_USAGE);
    return 0;
  }
  if (!command || !target) {
    io.err(DLQ_BIN_USAGE);
    return 2;
  }
  if (!DLQ_COMMANDS.includes(command)) {
    io.err(`redis-streams-dlq: unknown command "${escapeControl(command)}"\n\n${DLQ_BIN_USAGE}`);
    return 2;
  }
  return withConnection(values, (redis) => runDlq(redis, new DeadLetters(redis), command, target, ids, values, io));
}
