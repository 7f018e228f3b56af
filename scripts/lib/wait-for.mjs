// The one poll-until helper of the repository's tests, scripts and benchmark (typed in wait-for.d.mts).

/** Polls `condition` until it returns a truthy value or the deadline passes; never a fixed sleep. */
export async function waitFor(condition, { timeoutMs = 10_000, intervalMs = 20, message = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
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
