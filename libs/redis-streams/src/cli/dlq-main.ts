// The `redis-streams-dlq` command (bin: dlq.ts): the dead-letter commands alone (also `redis-streams dlq …`).
import { parseArgs } from 'node:util';
import { escapeControl } from '../escape-control.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import { CONNECTION_FLAGS, CONNECTION_HELP, UsageError, withConnection } from './cli-connection.js';
import type { CliIo } from './cli-io.js';
import { DLQ_COMMANDS, DLQ_FLAGS, DLQ_NAMING, DLQ_USAGE, checkDlqArgs, runDlq } from './dlq-command.js';

const DLQ_BIN_LINES = `usage:
  redis-streams-dlq ${DLQ_USAGE.replaceAll('\n  ', '\n  redis-streams-dlq ')}
  (each with [--url redis://…] or [--cluster redis://…,…])`;

/** `--help`. */
export const DLQ_BIN_USAGE = `${DLQ_BIN_LINES}

${CONNECTION_HELP}
${DLQ_NAMING}`;

/** What a usage error prints after it. */
export const DLQ_BIN_SHORT_USAGE = `${DLQ_BIN_LINES}\nredis-streams-dlq --help says more.`;

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
  if (!command || !target) throw new UsageError(command ? `${escapeControl(command)} needs a stream` : 'a command is needed');
  if (!DLQ_COMMANDS.includes(command)) throw new UsageError(`unknown command "${escapeControl(command)}"`);
  checkDlqArgs(command, ids, values);
  return withConnection(values, (redis) => runDlq(redis, new DeadLetters(redis), command, target, ids, values, io));
}
