import type { Context } from '@opentelemetry/api';
import type { OtelApi } from './otel-api.js';
import { stepFailed } from './safely.js';

/**
 * Runs a handler's `work` exactly once with `context` active (its spans are children of the entry's or the call's).
 * A context manager that throws before calling it: the work runs without it (reported once). One that throws after
 * calling it: the work's promise stands, its outcome the handler's, not a failure to run again. The work's own throw
 * (a dispatch that throws) is the handler's failure.
 */
export function runInContext<T>(api: OtelApi, context: Context, work: () => Promise<T>): Promise<T> {
  let ran = false;
  let running: Promise<T> | undefined;
  try {
    return api.context.with(context, () => {
      ran = true;
      return (running = work());
    });
  } catch (err) {
    if (running) return running;
    if (ran) throw err;
    stepFailed(api, 'context manager', err);
    return work();
  }
}
