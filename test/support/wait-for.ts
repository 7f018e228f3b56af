/** What a truthy value of T can be: `cond && value` waits for `value`. */
type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

/** Polls `condition` until it returns a truthy value or the deadline passes; never a fixed sleep. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 20, message = 'condition' }: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as Truthy<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${message} (last: ${String(last)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs)); // poll interval, not a synchronisation sleep
  }
}

/** Measures how long an async action takes, in ms. */
export async function timed<T>(action: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await action();
  return { value, ms: performance.now() - start };
}
