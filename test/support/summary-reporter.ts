import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints one plain closing line (`tests: N passed, N failed, N skipped`) that any CI can read, after one
 * `failed: <file> > <test>: <first line of the error>` line per failure, so a log's tail names them.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const failures: string[] = [];
    for (const mod of testModules) {
      const file = relative(process.cwd(), mod.moduleId);
      for (const test of mod.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') counts.passed++;
        else if (result.state === 'failed') {
          counts.failed++;
          failures.push(`failed: ${file} > ${test.fullName}: ${firstLine(result.errors?.[0]?.message)}`);
        } else counts.skipped++;
      }
      // A file that failed to load, or whose hooks failed after its tests passed (a process left running:
      // test/support/leftovers.ts), must count as a failure too.
      if (mod.state() === 'failed' && ![...mod.children.allTests()].some((t) => t.result().state === 'failed')) {
        counts.failed++;
        failures.push(`failed: ${file}: ${firstLine(mod.errors()[0]?.message)}`);
      }
    }
    for (const error of unhandledErrors)
      failures.push(`failed: unhandled error: ${firstLine((error as { message?: string } | null)?.message ?? safeString(error))}`);
    counts.failed += unhandledErrors.length;
    const list = failures.length > 0 ? `\n${failures.join('\n')}` : '';
    process.stdout.write(`${list}\ntests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}

function firstLine(message: string | undefined): string {
  return (message ?? 'no message').split('\n', 1)[0]?.slice(0, 200) ?? '';
}

/** A thrown value that is no Error (Vitest hands unhandled errors over serialized): whatever text it gives. */
function safeString(value: unknown): string {
  try {
    return typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    return 'an error that cannot be shown';
  }
}
