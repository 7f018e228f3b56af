import { isDeadLetter } from '../../dead-letter-mark.js';
import { describeHandlerError, handlerStack } from '../../describe-error.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { EntryContextArgs, RedisStreamsBatchContextArgs } from './entry-context.js';
import { withTimeout } from './handler-timeout.js';
import { isScheduled } from './retry-schedule.js';
import { acked, admit, handlerFailed, nextTry, prepare, Ready, runHandler, type DecideDeps } from './decide.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import type { ProcessTrace, SettleObserver } from './settle-observer.js';

/** One entry of a batch call: its payload and what its context says (a {@link Ready} entry is one). */
export interface BatchItem {
  readonly payload: unknown;
  readonly args: EntryContextArgs;
}

/**
 * Calls a batch handler (`@StreamPattern(key, { batch })`) once with every entry. Resolves with
 * undefined when every entry succeeded, or with the entries the handler said failed (index in
 * `items` → its error); rejects when the whole call failed.
 */
export type DispatchBatch = (
  pattern: string,
  items: readonly BatchItem[],
  args: RedisStreamsBatchContextArgs,
) => Promise<Map<number, unknown> | undefined>;

export interface BatchDecideDeps extends DecideDeps {
  dispatchBatch: DispatchBatch;
  /** Set when OpenTelemetry is there to report to (a single entry's decide is traced from above: telemetry/traced-decide.ts). */
  telemetry?: SettleObserver | undefined;
}

/**
 * Decides a batch for a batch handler: each entry gets the single-entry checks (deliveries,
 * size, decoding: refused ones are dead-lettered alone), then the rest go to ONE handler call.
 * It succeeds: all `'acked'`. It throws a {@link BatchFailure}: the entries it lists failed
 * (pending, or dead-lettered as for one entry), the others `'acked'`. It throws anything else:
 * every entry failed. A request (`send`) to a batch pattern is answered as by an event handler.
 * One event per entry, in order.
 */
export function decideBatch(deps: BatchDecideDeps, entries: readonly StreamEntry[], source: DeliverySource): Promise<SettledEvent[]> {
  try {
    return decideAtOnce(deps, entries, source);
  } catch (error) {
    // As from an async function: a rejection, never a throw.
    return Promise.reject(error);
  }
}

function decideAtOnce(deps: BatchDecideDeps, entries: readonly StreamEntry[], source: DeliverySource): Promise<SettledEvent[]> {
  const traces = deps.telemetry?.startAll(entries, source);
  // The common case, in a plain loop (no async frame to suspend per entry, far less for V8 to compile): every entry
  // checked and admitted at once, no request, one pattern. The first that is not goes on in decideRest, as it is.
  const ready: Ready[] = [];
  let pattern: string | undefined;
  let i = 0;
  let first: Prepared | undefined;
  if (!traces)
    for (; i < entries.length; i++) {
      const prepared = prepare(deps, entries[i]!, source);
      if (!(prepared instanceof Ready) || prepared.decoded.request || (pattern !== undefined && prepared.pattern !== pattern)) {
        first = { prepared };
        break;
      }
      const admitted = admit(deps, prepared, source);
      if (!(admitted instanceof Ready)) {
        first = { prepared, admitted };
        break;
      }
      pattern = prepared.pattern;
      ready.push(admitted);
    }
  if (first === undefined && pattern !== undefined) return callHandler(deps, pattern, ready, source, undefined);
  return decideRest(deps, entries, source, traces, ready, first);
}

/** An entry decideBatch's loop stopped at: what prepare (and admit, when it ran) gave. */
interface Prepared {
  prepared: ReturnType<typeof prepare>;
  admitted?: ReturnType<typeof admit>;
}

/**
 * decideBatch past its plain loop: the `ready` entries it took (the first `ready.length`, of one pattern) and the
 * next one's checks as far as they went (`first`); every entry with a trace, or an empty batch.
 */
async function decideRest(
  deps: BatchDecideDeps,
  entries: readonly StreamEntry[],
  source: DeliverySource,
  traces: (ProcessTrace | undefined)[] | undefined,
  taken: Ready[],
  first: Prepared | undefined,
): Promise<SettledEvent[]> {
  const events: SettledEvent[] = new Array<SettledEvent>(entries.length);
  try {
    // The entries ready for the handler, by pattern (one reader's streams share one pattern; kept apart all the same).
    const calls = new Map<string, { index: number[]; ready: Ready[] }>();
    let lastPattern: string | undefined;
    let call: { index: number[]; ready: Ready[] } | undefined;
    // Where the plain loop stopped (`taken` grows below: it is its pattern's call from here on).
    const at = taken.length;
    if (at > 0) {
      lastPattern = taken[0]!.pattern;
      calls.set(lastPattern, (call = { index: taken.map((_, i) => i), ready: taken }));
    }
    for (let i = at; i < entries.length; i++) {
      const entry = entries[i]!;
      const preparing = i === at && first ? first.prepared : prepare(deps, entry, source);
      let ready = preparing instanceof Promise ? await preparing : preparing;
      if (ready instanceof Ready) {
        traces?.[i]?.open(ready.decoded.headers, ready.decoded.request?.correlationId, ready.args.partition);
        const admitted = i === at && first?.admitted ? first.admitted : admit(deps, ready, source);
        ready = admitted instanceof Ready ? admitted : await admitted;
      }
      if (!(ready instanceof Ready)) events[i] = ready;
      // Requests only: the single-entry path answers them (an event handler answers none).
      else if (ready.decoded.request) events[i] = await runHandler(deps, ready, source);
      else {
        // One reader's entries share one pattern: look it up once per run, not per entry.
        if (ready.pattern !== lastPattern) {
          lastPattern = ready.pattern;
          call = calls.get(lastPattern);
          if (!call) calls.set(lastPattern, (call = { index: [], ready: [] }));
        }
        call!.index.push(i);
        call!.ready.push(ready);
      }
    }
    for (const [pattern, { index, ready }] of calls) {
      const decided = await callHandler(deps, pattern, ready, source, traces && index.map((i) => traces[i]));
      for (let j = 0; j < index.length; j++) events[index[j]!] = decided[j]!;
    }
  } catch (error) {
    // Redis failed (dead-lettering): every entry is still pending under this consumer.
    for (const trace of traces ?? []) trace?.fail(error);
    throw error;
  }
  if (traces) for (let i = 0; i < entries.length; i++) traces[i]?.end(events[i]!);
  return events;
}

async function callHandler(
  deps: BatchDecideDeps,
  pattern: string,
  ready: readonly Ready[],
  source: DeliverySource,
  traces: readonly (ProcessTrace | undefined)[] | undefined,
): Promise<SettledEvent[]> {
  // The ready entries are the call's items: no copy per entry.
  const items: readonly BatchItem[] = ready;
  const args = { pattern, group: deps.group, consumer: deps.consumer, size: items.length };
  const stream = ready[0]!.entry.stream;
  // A partitioned pattern's call may span its streams: the span then names the pattern.
  const call = traces && deps.telemetry?.startBatch(ready.every((r) => r.entry.stream === stream) ? stream : pattern, traces);
  let failed: Map<number, unknown> | undefined;
  try {
    const work = call ? call.run(() => deps.dispatchBatch(pattern, items, args)) : deps.dispatchBatch(pattern, items, args);
    failed = deps.handlerTimeoutMs === undefined ? await work : ((await withTimeout(work, deps.handlerTimeoutMs)) as typeof failed);
  } catch (error) {
    call?.end(error, true);
    return failAll(deps, pattern, ready, source, error);
  }
  call?.end(failed && failed.values().next().value, failed !== undefined);
  if (!failed) return ready.map((r) => acked(r.entry, source));
  let firstError: unknown;
  const events = await Promise.all(
    ready.map((r, i) => {
      if (!failed.has(i)) return acked(r.entry, source);
      const error = failed.get(i);
      firstError ??= error;
      return handlerFailed(deps, r.entry, source, error, true);
    }),
  );
  logFailed(deps, pattern, events, firstError);
  return events;
}

async function failAll(
  deps: BatchDecideDeps,
  pattern: string,
  ready: readonly Ready[],
  source: DeliverySource,
  error: unknown,
): Promise<SettledEvent[]> {
  const events = await Promise.all(ready.map((r) => handlerFailed(deps, r.entry, source, error, true)));
  logFailed(deps, pattern, events, error);
  return events;
}

/** `left pending, next try in 100–400 ms`: the failure line's `nextTry`, for several entries. */
function nextTries(failed: readonly SettledEvent[]): string {
  const delays = failed.map((e) => e.retryInMs ?? 0);
  const [min, max] = [Math.min(...delays), Math.max(...delays)];
  const scheduled = failed.some(isScheduled);
  const time = nextTry({ retryInMs: min, scheduled });
  return min === max || !scheduled ? time : time.replace(`in ${min} ms`, `in ${min}–${max} ms`);
}

/** One line per call, not one per entry (a failed batch of 500 would flood the log), with the stack; a refusal (DeadLetter) is logged by the dead-letterer. */
function logFailed(deps: BatchDecideDeps, pattern: string, events: readonly SettledEvent[], error: unknown): void {
  const failed = events.filter((e) => e.outcome !== 'acked' && !isDeadLetter(e.error));
  if (failed.length === 0) return;
  const pending = failed.filter((e) => e.outcome === 'failed').length;
  const dead = failed.length - pending;
  const next = nextTries(failed.filter((e) => e.outcome === 'failed'));
  const fate = dead === 0 ? next : pending === 0 ? `${dead} dead-lettered` : `${pending} ${next}, ${dead} dead-lettered`;
  const ids =
    failed
      .slice(0, 5)
      .map((e) => e.id)
      .join(', ') + (failed.length > 5 ? ', …' : '');
  deps.logger.error(
    `batch handler for "${pattern}" failed on ${failed.length} of ${events.length} entries (${ids}): ${describeHandlerError(error)}; ${fate}`,
    handlerStack(error),
  );
}
