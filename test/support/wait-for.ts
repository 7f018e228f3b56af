/** The one poll-until helper (scripts/lib/wait-for.mjs, shared with the scripts and the benchmark), typed. */
export { waitFor, type Truthy } from '../../scripts/lib/wait-for.mjs';

/** Measures how long an async action takes, in ms. */
export async function timed<T>(action: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await action();
  return { value, ms: performance.now() - start };
}
