import type { Context } from '@opentelemetry/api';
import type { OtelApi } from './otel-api.js';
import { stepFailed } from './safely.js';

/**
 * Runs a handler's `work` exactly once with `context` active (its spans are children of the entry's or the call's),
 * and gives the handler's own outcome whatever the app's context manager does: one that throws before calling it,
 * or returns without calling it, gets the work run without it; one that throws after the call, or returns something
 * else, leaves the work's own promise standing. Each is reported once. The work's own throw (a dispatch that throws)
 * is the handler's failure, even when the manager throws another while unwinding.
 */
export function runInContext<T>(api: OtelApi, context: Context, work: () => Promise<T>): Promise<T> {
  let ran = false;
  let running: Promise<T> | undefined;
  let threw = false;
  let thrown: unknown;
  try {
    api.context.with(context, () => {
      ran = true;
      try {
        return (running = work());
      } catch (err) {
        threw = true;
        thrown = err;
        throw err;
      }
    });
  } catch (err) {
    if (!threw || err !== thrown) stepFailed(api, 'context manager', err);
  }
  if (threw) throw thrown;
  // Called once: never again, whatever it returned.
  if (ran) return running!;
  stepFailed(api, 'context manager', new Error('context.with returned without calling the function it was given'));
  return work();
}
