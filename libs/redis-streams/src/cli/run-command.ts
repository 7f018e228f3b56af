import { describeError } from '../describe-error.js';
import { UsageError } from './cli-connection.js';
import { processIo, type CliIo, type CliMain } from './cli-io.js';

/**
 * Runs a CLI's main and resolves with its exit code: 2 for usage errors (parseArgs' own included), 1
 * for failures, with the error on `io.err` (then, for a usage error, its command's usage or `usage`).
 */
export async function runCommand(name: string, main: CliMain, usage: string, argv: string[], io: CliIo): Promise<number> {
  try {
    return await main(argv, io);
  } catch (err) {
    const parseError = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true;
    const usageError = err instanceof UsageError || parseError;
    // parseArgs' messages span lines of their own: each line escaped, the breaks kept.
    const text = parseError
      ? (err as Error).message
          .split('\n')
          .map((line) => describeError(new Error(line)))
          .join('\n')
      : describeError(err);
    // The command's own usage when the error names one (UsageError.usage), else the binary's.
    const shown = (err as { usage?: string }).usage ?? usage;
    io.err(`${name}: ${text}${usageError ? `\n\n${shown}` : ''}`);
    return usageError ? 2 : 1;
  }
}

/**
 * A binary's entry: runs the command on the process's arguments and output. The exit code is set,
 * not forced: process.exit() would drop what stdout has not yet written to a pipe (everything past
 * its 64 KiB buffer when the reader is slow).
 */
export function runMain(name: string, main: CliMain, usage: string): void {
  // A reader that went away (`| head -1`): stop quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  });
  let settled = false;
  // Node ends a process that holds nothing open, even with the command unsettled (a connection that
  // ended without settling its connect()): that must not pass for a success.
  process.once('beforeExit', () => {
    if (settled) return;
    processIo.err(`${name}: stopped before the command finished (a connection ended without an answer or an error)`);
    process.exitCode = 1;
  });
  void runCommand(name, main, usage, process.argv.slice(2), processIo).then((code) => {
    settled = true;
    process.exitCode = code;
  });
}
