import {
  admit,
  decide,
  Deciding,
  prepare,
  Ready,
  runHandler,
  startDecide,
  workFailed,
  type DecideDeps,
  type DirectDecide,
} from '../consumer/settle/decide.js';
import type { DeliverySource, SettledEvent } from '../consumer/settle/settled-event.js';
import type { ProcessTrace, SettleObserver } from '../consumer/settle/settle-observer.js';
import type { StreamEntry } from '../stream-entry.js';

/**
 * `decide` with its trace around it, composed here from decide's own steps (the checks, the entry's
 * admission, the handler): deciding calls nothing of telemetry, telemetry wraps it from above. The
 * span opens once the entry is decoded (its parent is the producer's context in the headers), the
 * handler runs inside it, and it ends with the outcome, or fails when Redis failed the decision.
 * Like decide, no async frame: on the hot path (checks passed at once) the handler's promise, decide's
 * `then` on it and one more here; every promise costs the context manager's hooks once it runs.
 */
export function tracedDecide(
  observer: SettleObserver,
  deps: DecideDeps,
): (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent> {
  return (entry, source) => {
    const trace = observer.start(entry, source);
    return trace ? withTrace(deps, entry, source, trace) : decide(deps, entry, source);
  };
}

/**
 * The batch settler's split decide (see startDecide) with telemetry: an entry with a trace (an SDK is there)
 * is decided as tracedDecide does; without one, its handler is started and awaited by the settler itself.
 */
export function tracedDirect(observer: SettleObserver, deps: DecideDeps): DirectDecide {
  return {
    start: (entry, source) => {
      const trace = observer.start(entry, source);
      return trace ? new Deciding(withTrace(deps, entry, source, trace)) : startDecide(deps, entry, source);
    },
    failed: (entry, source, error) => workFailed(deps, entry, source, error),
  };
}

/** decide, traced: the span ends with the outcome, or fails when Redis failed the decision. */
function withTrace(deps: DecideDeps, entry: StreamEntry, source: DeliverySource, trace: ProcessTrace): Promise<SettledEvent> {
  let deciding: SettledEvent | Promise<SettledEvent>;
  try {
    deciding = decideTraced(deps, entry, source, trace);
  } catch (error) {
    deciding = Promise.reject(error);
  }
  if (!(deciding instanceof Promise)) {
    // Decided without a promise (not so today: every refusal needs Redis): ended now.
    trace.end(deciding);
    return Promise.resolve(deciding);
  }
  return deciding.then(
    (event) => {
      trace.end(event);
      return event;
    },
    (error: unknown) => {
      trace.fail(error);
      throw error;
    },
  );
}

function decideTraced(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  trace: ProcessTrace,
): SettledEvent | Promise<SettledEvent> {
  const prepared = prepare(deps, entry, source);
  if (prepared instanceof Ready) return openAndRun(deps, prepared, source, trace);
  if (!(prepared instanceof Promise)) return prepared;
  return prepared.then((ready) => (ready instanceof Ready ? openAndRun(deps, ready, source, trace) : ready));
}

function openAndRun(deps: DecideDeps, prepared: Ready, source: DeliverySource, trace: ProcessTrace): Promise<SettledEvent> {
  trace.open(prepared.decoded.headers, prepared.decoded.request?.correlationId, prepared.args.partition);
  const within = <T>(work: () => Promise<T>): Promise<T> => trace.run(work);
  const admitted = admit(deps, prepared, source);
  if (admitted instanceof Ready) return runHandler(deps, admitted, source, within);
  return admitted.then((ready) => (ready instanceof Ready ? runHandler(deps, ready, source, within) : ready));
}
