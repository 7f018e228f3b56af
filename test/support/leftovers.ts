import { reapMarked, WORKER_MARKER } from '../../scripts/lib/leftovers.mjs';

/**
 * Every process a test file starts must be gone when the file is done, whatever its outcome: a test
 * that timed out while its worker, demo or cluster ran must not leave them running for the next file
 * (nor for 20 minutes after the run). This worker's children inherit its marker (set before any test
 * spawns), so even one re-parented to init (a detached server whose parent was killed) is found.
 * What is left once the file's own afterAll hooks ran is killed, and fails the file.
 */
export function failOnLeftovers(): void {
  // This process' own id, never an inherited one: a test may start a Vitest run of its own (test/leftovers.spec.ts).
  const worker = (process.env[WORKER_MARKER] = String(process.pid));
  afterAll(async () => {
    const left = await reapMarked(WORKER_MARKER, worker);
    if (left.length > 0)
      throw new Error(
        `this file left ${left.length} process(es) running (killed now): ${left.map((p) => `${p.pid} ${p.args.slice(0, 160)}`).join('; ')}`,
      );
  });
}
