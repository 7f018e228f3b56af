/**
 * Where a command writes its lines: the process's stdout and stderr (`processIo`), or a caller's own
 * (the tests run the commands in process and read what they wrote).
 */
export interface CliIo {
  /** One piece of output, a newline added (console.log). */
  out(text: string): void;
  /** One error line, a newline added (console.error). */
  err(text: string): void;
  /** Writes as it is, no newline added (a terminal's clear-screen sequence). */
  raw(text: string): void;
  /** Whether the output is a terminal: --watch then redraws in place. */
  readonly tty: boolean;
}

export const processIo: CliIo = {
  out: (text) => console.log(text),
  err: (text) => console.error(text),
  raw: (text) => void process.stdout.write(text),
  get tty() {
    return process.stdout.isTTY === true;
  },
};

/** A command of the CLI: its arguments in, its exit code out, its output on `io`. */
export type CliMain = (argv: string[], io: CliIo) => Promise<number>;
