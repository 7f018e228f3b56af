import { admit, prepare, Ready, runHandler, type DecideDeps } from '../consumer/settle/decide.js';
import type { DeliverySource, SettledEvent } from '../consumer/settle/settled-event.js';
import type { ProcessTrace, SettleObserver } from '../consumer/settle/settle-observer.js';
import type { StreamEntry } from '../stream-entry.js';

/**
 * `decide` with its trace around it, composed here from decide's own steps (the checks, the entry's
 * admission, the handler): deciding calls nothing of telemetry, telemetry wraps it from above. The
 * span opens once the entry is decoded (its parent is the producer's context in the headers), the
 * handler runs inside it, and it ends with the outcome, or fails when Redis failed the decision.
 */
export function tracedDecide(
  observer: SettleObserver,
  deps: DecideDeps,
): (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent> {
  return (entry, source) => {
    const trace = observer.start(entry, source);
    if (!trace) return decideTraced(deps, entry, source, undefined);
    return decideTraced(deps, entry, source, trace).then(
      (event) => {
        trace.end(event);
        return event;
      },
      (error: unknown) => {
        trace.fail(error);
        throw error;
      },
    );
  };
}

async function decideTraced(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  trace: ProcessTrace | undefined,
): Promise<SettledEvent> {
  const prepared = await prepare(deps, entry, source);
  if (!(prepared instanceof Ready)) return prepared;
  trace?.open(prepared.decoded.headers, prepared.decoded.request?.correlationId, prepared.args.partition);
  const admitted = await admit(deps, prepared, source);
  if (!(admitted instanceof Ready)) return admitted;
  return runHandler(deps, admitted, source, trace && ((work) => trace.run(work)));
}
