// Test files in order of their measured time, longest first (test/support/file-seconds.json: the files of 10 s and
// more in a CI run's npm test, by project). Vitest orders by its cache of past durations, which a clean clone (CI)
// does not have, and then by file size: a 40 s file that started last held CI for its whole length after the others
// had ended. The rest follow in Vitest's own order; a file missing from the list only runs later.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const SECONDS = JSON.parse(readFileSync(new URL('./file-seconds.json', import.meta.url), 'utf8')) as Record<string, number>;

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const seconds = (spec: TestSpecification) => SECONDS[`${spec.project.name} ${relative(spec.project.config.root, spec.moduleId)}`] ?? 0;
    // The cluster project's files first: Vitest hands a worker process on to the next file only when that file is of
    // the same project (else it starts a new one, loading Nest and the library again).
    const first = (spec: TestSpecification) => (spec.project.name === 'cluster' ? 0 : 1);
    // Array.prototype.sort is stable: equal weights (the unlisted files, 0) keep Vitest's order.
    return base.sort((a, b) => first(a) - first(b) || seconds(b) - seconds(a));
  }
}
