import {
  acked,
  admit,
  decide,
  Deciding,
  handlerWork,
  prepare,
  Ready,
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
 * Like decide, no async frame: on the hot path (checks passed at once) the handler's promise and the one
 * `then` on it that decides and ends the span; every promise costs the context manager's hooks once it runs.
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

/**
 * decide, traced: the span ends with the outcome, or fails when Redis failed the decision. On the hot path (checked at
 * once, no admission) the span ends in the one `then` on the handler's promise that decides: no promise more than
 * decide's (each costs the context manager's hooks).
 */
function withTrace(deps: DecideDeps, entry: StreamEntry, source: DeliverySource, trace: ProcessTrace): Promise<SettledEvent> {
  let prepared: Ready | SettledEvent | Promise<Ready | SettledEvent>;
  try {
    prepared = prepare(deps, entry, source);
  } catch (error) {
    return rejected(trace, error);
  }
  return onwards(deps, source, trace, prepared, openAndRun);
}

function openAndRun(deps: DecideDeps, prepared: Ready, source: DeliverySource, trace: ProcessTrace): Promise<SettledEvent> {
  trace.open(prepared.decoded.headers, prepared.decoded.request?.correlationId, prepared.args.partition);
  let admitted: Ready | Promise<Ready | SettledEvent>;
  try {
    admitted = admit(deps, prepared, source);
  } catch (error) {
    return rejected(trace, error);
  }
  return onwards(deps, source, trace, admitted, runTraced);
}

/**
 * A step's answer taken on: an entry still ready goes to `next` (at once when the step was synchronous), a refusal
 * ends the span (refused at once: not so today, every refusal needs Redis), Redis' failure fails it.
 */
function onwards(
  deps: DecideDeps,
  source: DeliverySource,
  trace: ProcessTrace,
  step: Ready | SettledEvent | Promise<Ready | SettledEvent>,
  next: (deps: DecideDeps, ready: Ready, source: DeliverySource, trace: ProcessTrace) => Promise<SettledEvent>,
): Promise<SettledEvent> {
  if (step instanceof Ready) return next(deps, step, source, trace);
  if (!(step instanceof Promise)) return Promise.resolve(ended(trace, step));
  return step.then(
    (ready) => (ready instanceof Ready ? next(deps, ready, source, trace) : ended(trace, ready)),
    (error: unknown) => failed(trace, error),
  );
}

/** runHandler with the span: the handler runs in it, and it ends in the `then` that decides. */
function runTraced(deps: DecideDeps, ready: Ready, source: DeliverySource, trace: ProcessTrace): Promise<SettledEvent> {
  const { entry } = ready;
  return handlerWork(deps, ready, trace).then(
    () => ended(trace, acked(entry, source)),
    (error: unknown) => {
      let decided: SettledEvent | Promise<SettledEvent>;
      try {
        decided = workFailed(deps, entry, source, error);
      } catch (err) {
        return failed(trace, err);
      }
      if (!(decided instanceof Promise)) return ended(trace, decided);
      return decided.then(
        (event) => ended(trace, event),
        (err: unknown) => failed(trace, err),
      );
    },
  );
}

/** The span ended with the outcome. */
function ended(trace: ProcessTrace, event: SettledEvent): SettledEvent {
  trace.end(event);
  return event;
}

/** Redis failed the decision: the span ends as failed, and the error goes on. */
function failed(trace: ProcessTrace, error: unknown): never {
  trace.fail(error);
  throw error;
}

/** {@link failed}, for a step that threw before any promise: the same, as a rejection. */
function rejected(trace: ProcessTrace, error: unknown): Promise<never> {
  trace.fail(error);
  return Promise.reject(error);
}
