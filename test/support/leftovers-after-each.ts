import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

/**
 * What a test file's tests start and must not leave behind, ended after each test: consumers closed,
 * child processes killed (SIGKILL, waited for), temporary directories removed. Push into the lists.
 */
export function useLeftoversAfterEach(): { consumers: { close(): Promise<void> }[]; children: ChildProcess[]; dirs: string[] } {
  const consumers: { close(): Promise<void> }[] = [];
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.close()));
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((resolve) => child.once('exit', resolve));
      }
    }
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return { consumers, children, dirs };
}
