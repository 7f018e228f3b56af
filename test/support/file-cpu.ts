// Opt-in (TEST_CPU_LOG=<path>): each test file's CPU, appended as `<cpu s> <file>` when the file ends. CI is
// CPU-bound on 2 cores: this says which files its budget goes to. Read from /proc/self/stat: the worker's own
// time and that of the processes it reaped (each file's redis-server, fixtures and Chromium among them).
import { appendFileSync, readFileSync } from 'node:fs';

const TICKS_PER_S = 100;

function cpuSeconds(): number {
  // Fields after the command name (which may hold spaces): utime stime cutime cstime are 14–17 overall.
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0) / TICKS_PER_S;
}

export function logFileCpu(): void {
  const path = process.env.TEST_CPU_LOG;
  if (!path) return;
  const start = cpuSeconds();
  afterAll(() => {
    const file = expect.getState().testPath ?? '?';
    appendFileSync(
      path,
      `${(cpuSeconds() - start).toFixed(1)} ${file.replace(`${process.cwd()}/`, '')} ${process.env.TEST_REDIS ?? 'node'}\n`,
    );
  });
}
