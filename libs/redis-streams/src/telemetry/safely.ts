import { describeError } from '../describe-error.js';
import { lineLost } from '../guarded-logger.js';
import type { OtelApi } from './otel-api.js';

const reported = new Set<string>();

/**
 * Runs a step of the app's OpenTelemetry SDK (a propagator, a tracer, a meter): whatever it
 * throws is reported once per step through the API's diag logger and replaced by `fallback`.
 * Telemetry must never change what happens to an entry: a throwing propagator once made an
 * entry, and its batch, look like a Redis failure.
 */
export function safely<T>(api: OtelApi, step: string, fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch (err) {
    stepFailed(api, step, err);
    return fallback;
  }
}

/** What {@link safely} does with a failure, for the per-entry steps that catch their own (no closure per entry). */
export function stepFailed(api: OtelApi, step: string, err: unknown): void {
  if (reported.has(step)) return;
  reported.add(step);
  let line = `nestjs-redis-streams: OpenTelemetry ${step} failed, carrying on without it`;
  try {
    line += `: ${describeError(err)}`;
  } catch {
    // What the SDK threw cannot become text (a getter that throws, a hostile Proxy): still carried no further.
    line += ' (its error could not be described)';
  }
  try {
    api.diag.warn(line);
  } catch (diagError) {
    // The API does not guard its diag logger: one that throws would carry the step's failure out after all.
    lineLost(line, undefined, diagError);
  }
}
