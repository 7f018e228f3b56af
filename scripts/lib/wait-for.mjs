// The one poll-until helper of the repository's tests, scripts and benchmark (typed in wait-for.d.mts).

/**
 * Polls `condition` until it returns a truthy value or the deadline passes; never a fixed sleep. With `progress`,
 * the deadline runs from the last change of its value: work that goes on, however slowly on a busy machine, is
 * waited for, and work that stops fails `timeoutMs` after it stopped.
 */
export async function waitFor(condition, { timeoutMs = 10_000, intervalMs = 20, message = 'condition', progress } = {}) {
  let deadline = Date.now() + timeoutMs;
  let seen = progress?.();
  let last;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    if (progress) {
      const now = progress();
      if (now !== seen) [seen, deadline] = [now, Date.now() + timeoutMs];
    }
    if (Date.now() > deadline) {
      const still = progress ? ` with no progress (at ${String(seen)})` : '';
      throw new Error(`timed out after ${timeoutMs} ms${still} waiting for ${message} (last: ${String(last)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs)); // poll interval, not a synchronisation sleep
  }
}
