import type { Deserializer } from '../../ports.js';
import { decodeEntry, EntryDecodeError, type DecodedEntry } from '../../codec/entry-codec.js';
import { isReplyStream, replyStreamPattern } from '../../codec/reply-stream.js';
import { isDeadLetter } from '../../dead-letter-mark.js';
import { describeError, describeHandlerError, handlerStack } from '../../describe-error.js';
import { quotedPreview as preview } from '../../escape-control.js';
import { RedisWriteError } from '../../redis/replies/redis-errors.js';
import type { StreamEntry } from '../../stream-entry.js';
import { deadLetter, type DeadLettererDeps } from './dead-letterer.js';
import { EntryContextArgs } from './entry-context.js';
import { withTimeout } from './handler-timeout.js';
import { markRecording, markScheduled, retryTime, type RetryScheduleDeps, type RetryTime } from './retry-schedule.js';
import { rateLimitedDelay } from '../../rate-limited-mark.js';
import { checkedDelay } from '../../options/retry-options.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import type { RetryDelay } from '../../options/retry-options.js';
import { NotYet, type Admission } from './admission.js';

/**
 * Runs the handler for `pattern` (and, for a request, writes its replies); resolves when the
 * entry may be acked, rejects when it must stay pending: with a {@link RedisWriteError} when
 * Redis, not the handler, failed (a reply it refused or did not take). `args` are what the
 * handler's context says; the host builds its own context from them.
 */
export type Dispatch = (pattern: string, entry: DecodedEntry, args: EntryContextArgs) => Promise<unknown>;

/** What a stream key is to the app: its handler pattern, and its partition when the stream is partitioned. */
import type { ResolvedDurableAcks } from '../../options/durability-options.js';

export interface StreamOrigin {
  pattern: string;
  partition?: number;
  /** The pattern's own retry policy (`@StreamPattern(key, { retry })`), over the server's. */
  retry?: RetryDelay | undefined;
  /** `@StreamPattern(key, { ordered: true })`: one key's entries one at a time, in id order. */
  ordered?: true;
  /** An ordered pattern's durable acks (its own, or the server's `durableAcks`). */
  durableAcks?: ResolvedDurableAcks;
}

export interface DecideDeps extends DeadLettererDeps, RetryScheduleDeps {
  dispatch: Dispatch;
  originOf: (stream: string) => StreamOrigin;
  deserializer: Deserializer<string, unknown>;
  keyPrefix: string;
  maxDeliveries: number;
  maxEntryBytes: number | undefined;
  handlerTimeoutMs: number | undefined;
  /** The check an entry of `stream` passes before its handler runs, and what a RateLimitedException slows (the plan's intake). */
  admissionOf: (stream: string) => Admission | undefined;
}

/**
 * Decides one entry: decode → dispatch → `'acked'` on success (the batch settler sends the
 * XACK); on failure leave it pending (it returns through reclaim) or, when it can never
 * succeed, move it to the dead-letter stream. Handler failures and replies Redis did not take
 * are logged and returned, never thrown; only Redis failing a step of the decision itself
 * (dead-lettering) rejects, and then the entry is still pending under this consumer, so
 * nothing is lost.
 */
export function decide(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  /** What prepare() gave already (startDecide): not prepared twice. */
  prepared?: SettledEvent | Promise<Ready | SettledEvent>,
): Promise<SettledEvent> {
  let preparing: Ready | SettledEvent | Promise<Ready | SettledEvent>;
  try {
    preparing = prepared ?? prepare(deps, entry, source);
  } catch (error) {
    return Promise.reject(error);
  }
  // The hot path (checked at once: no Redis, a synchronous deserializer): the handler's promise and one more.
  if (preparing instanceof Ready) return admitAndRun(deps, preparing, source);
  return Promise.resolve(preparing).then((ready) => (ready instanceof Ready ? admitAndRun(deps, ready, source) : ready));
}

function admitAndRun(deps: DecideDeps, ready: Ready, source: DeliverySource): Promise<SettledEvent> {
  const admitted = admit(deps, ready, source);
  if (admitted instanceof Ready) return runHandler(deps, admitted, source);
  return admitted.then((r) => (r instanceof Ready ? runHandler(deps, r, source) : r));
}

/** Runs the handler of an entry ready for it, and decides what it did: one `then` on its promise, no async frame. */
export function runHandler(deps: DecideDeps, ready: Ready, source: DeliverySource): Promise<SettledEvent> {
  const { entry } = ready;
  return handlerWork(deps, ready).then(
    () => acked(entry, source),
    (error: unknown) => workFailed(deps, entry, source, error),
  );
}

/** What runs a handler's dispatch inside something (telemetry: the entry's span as the active context). */
export interface DispatchScope {
  run<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * The handler's call for an entry ready for it: its promise (a dispatch that throws is a rejection), bounded by
 * handlerTimeoutMs; inside `scope` when given.
 */
export function handlerWork(deps: DecideDeps, ready: Ready, scope?: DispatchScope): Promise<unknown> {
  const { decoded, args, pattern } = ready;
  let work: Promise<unknown>;
  try {
    work = scope ? scope.run(() => deps.dispatch(pattern, decoded, args)) : deps.dispatch(pattern, decoded, args);
    if (deps.handlerTimeoutMs !== undefined) work = withTimeout(work, deps.handlerTimeoutMs);
  } catch (error) {
    // Thrown before the handler's promise (a dispatch that throws): the handler failed, as with a rejection.
    work = Promise.reject(error);
  }
  return work;
}

/** What a handler's failure (or a reply Redis did not take) comes to. */
export function workFailed(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  error: unknown,
): SettledEvent | Promise<SettledEvent> {
  return error instanceof RedisWriteError ? replyFailed(deps, entry, source, error) : handlerFailed(deps, entry, source, error);
}

/** decide() split for a caller that awaits the handler itself (see startDecide), bound to its deps. */
export interface DirectDecide {
  start(entry: StreamEntry, source: DeliverySource): Promise<unknown> | Deciding;
  /** What the started work's rejection comes to (its fulfilment is `acked`). */
  failed(entry: StreamEntry, source: DeliverySource, error: unknown): SettledEvent | Promise<SettledEvent>;
}

/** decide()'s answer when the entry's handler did not start at once (see startDecide): the decision under way. */
export class Deciding {
  constructor(readonly event: SettledEvent | Promise<SettledEvent>) {}
}

/**
 * decide() for a caller that awaits the handler itself (the batch settler's worker; with telemetry, for an entry without a trace): when the
 * entry is checked at once and no gate holds it, its handler is started and its work returned, whose fulfilment
 * is `acked(entry, source)` and whose rejection `workFailed(…)`; otherwise the decision under way, as decide's.
 * The same steps as decide() without its own promise and closures per entry (the drain's hot path).
 */
export function startDecide(deps: DecideDeps, entry: StreamEntry, source: DeliverySource): Promise<unknown> | Deciding {
  let preparing: Ready | SettledEvent | Promise<Ready | SettledEvent>;
  try {
    preparing = prepare(deps, entry, source);
  } catch (error) {
    return new Deciding(Promise.reject(error));
  }
  if (!(preparing instanceof Ready)) return new Deciding(decide(deps, entry, source, preparing));
  const admitted = admit(deps, preparing, source);
  if (admitted instanceof Ready) return handlerWork(deps, admitted);
  return new Deciding(admitted.then((r) => (r instanceof Ready ? runHandler(deps, r, source) : r)));
}

/**
 * An entry decoded and checked, with its context's args: what its handler is called with (a batch call's item as it
 * is). It is its own decoded entry: the decoder's answer is copied in, not kept (one object less held per entry, which
 * a batch holds until its call ends).
 */
export class Ready implements DecodedEntry {
  readonly payload: unknown;
  readonly headers: Record<string, string>;
  readonly request: DecodedEntry['request'];

  constructor(
    readonly entry: StreamEntry,
    decoded: DecodedEntry,
    readonly args: EntryContextArgs,
    readonly pattern: string,
  ) {
    this.payload = decoded.payload;
    this.headers = decoded.headers;
    this.request = decoded.request;
  }

  /** The entry as decoded (payload, headers, request). */
  get decoded(): DecodedEntry {
    return this;
  }
}

/**
 * The checks before any handler runs (deliveries, size, decoding, the reply stream): the entry
 * ready for its handler, or the event of refusing it (dead-lettered). Synchronous when nothing
 * needs Redis or an asynchronous deserializer: the hot path then makes no promise here.
 */
export function prepare(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
): Ready | SettledEvent | Promise<Ready | SettledEvent> {
  // Delivered again and again without ever being settled: its consumers died, or Redis kept failing its settle step.
  if (entry.deliveryCount > deps.maxDeliveries) {
    return deadLetter(
      deps,
      entry,
      source,
      `delivered ${entry.deliveryCount} times (maxDeliveries ${deps.maxDeliveries}) without being settled`,
    );
  }
  if (deps.maxEntryBytes !== undefined) {
    const max = deps.maxEntryBytes;
    const bytes = entryBytes(entry);
    // Too large to hold twice: the dead letter says where it is, the entry stays in its stream.
    const tooLarge = (size: number) =>
      deadLetter(deps, entry, source, `entry is ${size} bytes, above maxEntryBytes (${max})`, undefined, false);
    if (bytes > max) {
      // The decoded strings count an invalid UTF-8 byte as U+FFFD's three: ask Redis for the bytes it holds.
      if (!hasReplacementChar(entry)) return tooLarge(bytes);
      return deps.commands
        .entryBytes(entry.stream, entry.id)
        .then((exact) => (exact !== null && exact <= max ? decodeAndCheck(deps, entry, source) : tooLarge(exact ?? bytes)));
    }
  }
  return decodeAndCheck(deps, entry, source);
}

function decodeAndCheck(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
): Ready | SettledEvent | Promise<Ready | SettledEvent> {
  let decoding: DecodedEntry | Promise<DecodedEntry>;
  try {
    decoding = decodeEntry(entry, deps.deserializer);
  } catch (error) {
    return deadLetter(deps, entry, source, undecodable(error), error);
  }
  if (!(decoding instanceof Promise)) return checked(deps, entry, source, decoding);
  return decoding.then<Ready | SettledEvent, Ready | SettledEvent>(
    (decoded) => checked(deps, entry, source, decoded),
    (error: unknown) => deadLetter(deps, entry, source, undecodable(error), error),
  );
}

/** Why an entry did not decode, without its id and stream: the dead-letterer's line names them. */
const undecodable = (error: unknown): string =>
  describeError(error instanceof EntryDecodeError ? { message: `cannot decode entry: ${error.reason}` } : error);

function checked(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  decoded: DecodedEntry,
): Ready | SettledEvent | Promise<Ready | SettledEvent> {
  // Refused before the handler runs and before any command touches the key: it can never be answered.
  if (decoded.request && !isReplyStream(deps.keyPrefix, decoded.request.replyTo)) {
    return deadLetter(
      deps,
      entry,
      source,
      `replyTo ${preview(decoded.request.replyTo)} is not a reply stream (${replyStreamPattern(deps.keyPrefix)}): the request can never be answered`,
    );
  }
  const { pattern, partition } = deps.originOf(entry.stream);
  const args = new EntryContextArgs(
    entry.stream,
    pattern,
    entry.id,
    deps.group,
    deps.consumer,
    entry.deliveryCount,
    decoded.headers,
    entry.fields!,
    partition,
  );
  return new Ready(entry, decoded, args, pattern);
}

/** The entry's admission (the plan's, for its stream): the entry as it is when none holds it back, else its gate's answer. */
export function admit(deps: DecideDeps, ready: Ready, source: DeliverySource): Ready | Promise<Ready | SettledEvent> {
  const gate = deps.admissionOf(ready.entry.stream);
  return gate ? gated(deps, gate, ready, source) : ready;
}

/**
 * The entry starts once its gate lets it; held back, it is tried again at its turn, its delivery
 * not counted (as a handler's RateLimitedException, without its log line: waiting is the gate
 * working). A gate that throws fails the entry as its handler would.
 */
function gated(deps: DecideDeps, gate: Admission, ready: Ready, source: DeliverySource): Ready | Promise<Ready | SettledEvent> {
  const { entry } = ready;
  let passing: NotYet | undefined | Promise<NotYet | undefined>;
  try {
    passing = gate.pass(entry, ready.decoded);
  } catch (error) {
    return Promise.resolve(handlerFailed(deps, entry, source, error));
  }
  if (passing === undefined) return ready;
  const waiting = (notYet: NotYet): Promise<SettledEvent> => {
    const settled = (time: RetryTime): SettledEvent => {
      if (!time.scheduled)
        deps.logger.warn(`entry ${entry.id} of "${entry.stream}" ${notYet.message}: ${nextTry(time)}, its delivery counted`);
      const event: SettledEvent = { ...failedEvent(entry, source, notYet), retryInMs: time.retryInMs };
      return time.scheduled ? markScheduled(event) : event;
    };
    const time = retryTime(deps, entry, notYet);
    return time instanceof Promise ? time.then(settled) : Promise.resolve(settled(time));
  };
  return Promise.resolve(passing).then<Ready | SettledEvent>((notYet) => (notYet === undefined ? ready : waiting(notYet)));
}

/**
 * The handler failed on this entry: refused for good (DeadLetterException) or on its last
 * allowed delivery, it is dead-lettered; otherwise it stays pending and is tried again at the
 * time its retry policy (or a RetryLaterException) gives, or once idle without one.
 */
export function handlerFailed(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  error: unknown,
  quiet = false,
): SettledEvent | Promise<SettledEvent> {
  if (isDeadLetter(error))
    return deadLetter(deps, entry, source, `handler refused it: ${describeError(error)}`, error, true, handlerStack(error), false);
  // With a delay it can keep (an invalid one is an ordinary failure, counted, and said so by the retry schedule).
  if (typeof checkedDelay(rateLimitedDelay(error)) === 'number') return rateLimited(deps, entry, source, error);
  // The handler's own error (class and message; the stack beside the log line), not Nest's stand-in for it.
  const why = describeHandlerError(error);
  if (entry.deliveryCount >= deps.maxDeliveries) {
    const reason = `handler failed on delivery ${entry.deliveryCount} of ${deps.maxDeliveries}: ${why}`;
    return deadLetter(deps, entry, source, reason, error, true, handlerStack(error), !quiet);
  }
  const failed = (time: RetryTime): SettledEvent => {
    if (!quiet)
      deps.logger.error(
        `handler for stream "${entry.stream}" failed on entry ${entry.id} (delivery ${entry.deliveryCount} of ${deps.maxDeliveries}): ${why}; ${nextTry(time)}`,
        handlerStack(error),
      );
    const event: SettledEvent = { ...failedEvent(entry, source, error), retryInMs: time.retryInMs };
    return time.scheduled ? markScheduled(event) : event;
  };
  const time = retryTime(deps, entry, error);
  return time instanceof Promise ? markRecording(time.then(failed)) : failed(time);
}

/**
 * The handler said the downstream is rate limited (RateLimitedException): the entry is tried again
 * when it asked, its delivery not counted (never a dead letter for it), and a rate-limited pattern
 * starts nothing meanwhile, in every worker of the group.
 */
function rateLimited(deps: DecideDeps, entry: StreamEntry, source: DeliverySource, error: unknown): SettledEvent | Promise<SettledEvent> {
  const settled = (time: RetryTime, slowed?: string): SettledEvent => {
    // Not scheduled (the record refused, or the entry no longer ours): its delivery stays counted.
    const counted = time.scheduled ? 'its delivery not counted' : 'its delivery counted';
    deps.logger.warn(
      `handler for stream "${entry.stream}" was rate limited on entry ${entry.id}: ${nextTry(time)}, ${counted}${slowed ? `; ${slowed} starts nothing for ${time.retryInMs} ms` : ''}`,
    );
    const event: SettledEvent = { ...failedEvent(entry, source, error), retryInMs: time.retryInMs };
    return time.scheduled ? markScheduled(event) : event;
  };
  const time = retryTime(deps, entry, error);
  // What the exception slows (the pattern's limit, or its key's): the pattern's gate says.
  const gate = deps.admissionOf(entry.stream);
  if (!gate) return time instanceof Promise ? time.then((t) => settled(t)) : settled(time);
  return Promise.resolve(time).then(async (t) => {
    const slowing = t.scheduled && t.retryInMs > 0 ? gate.slow(entry, t.retryInMs) : undefined;
    if (!slowing) return settled(t);
    await slowing.slowed.catch((err: unknown) =>
      deps.logger.warn(`could not slow ${slowing.what} for ${t.retryInMs} ms: ${describeError(err)}`),
    );
    return settled(t, slowing.what);
  });
}

/** What a failure's log line says of its next try. */
export const nextTry = (time: RetryTime): string =>
  time.scheduled
    ? `left pending, next try in ${time.retryInMs} ms`
    : `left pending, next try once idle ${time.retryInMs} ms (minIdleMs − leaseRenewMs: ${time.why ?? 'no retry policy'})`;

const failedEvent = (entry: StreamEntry, source: DeliverySource, error: unknown): SettledEvent => ({
  stream: entry.stream,
  id: entry.id,
  deliveryCount: entry.deliveryCount,
  source,
  outcome: 'failed',
  error,
});

/**
 * A reply Redis refused or did not take (NOPERM, a master down, a timeout): that concerns this
 * entry only. It stays pending, as a failed entry does, and comes back through reclaim; its
 * batch-mates are settled and the loop goes on (no restart, whose self-drain would count a
 * delivery for each of them). When Redis is down altogether the loop's own commands fail too
 * and take the Redis-failure path. A reply key that refuses for good is dead-lettered at once.
 */
function replyFailed(
  deps: DecideDeps,
  entry: StreamEntry,
  source: DeliverySource,
  error: RedisWriteError,
): SettledEvent | Promise<SettledEvent> {
  // The reply key itself refuses (a hostile write made it another type, or used up its ids).
  if (error.permanent)
    return deadLetter(deps, entry, source, `${error.what} refused: ${error.refusal}; the request can never be answered`, error);
  if (entry.deliveryCount >= deps.maxDeliveries) {
    return deadLetter(
      deps,
      entry,
      source,
      `${error.what} could not be written on delivery ${entry.deliveryCount} of ${deps.maxDeliveries}: ${error.refusal}`,
      error,
    );
  }
  deps.logger.error(
    `${error.what} could not be written (delivery ${entry.deliveryCount} of ${deps.maxDeliveries}): ${error.refusal}; left pending`,
  );
  return { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source, outcome: 'failed', error };
}

/** The handler succeeded: to be acked (the batch settler sends the XACK). */
export function acked(entry: StreamEntry, source: DeliverySource): SettledEvent {
  return { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source, outcome: 'acked' };
}

/** An upper bound of the entry's bytes: exact unless a value was not UTF-8 (see hasReplacementChar). */
function entryBytes(entry: StreamEntry): number {
  let bytes = 0;
  for (const part of entry.fields ?? []) bytes += Buffer.byteLength(part);
  return bytes;
}

/** U+FFFD in a value: maybe a byte that was not UTF-8, which the decoded string counts as three. */
function hasReplacementChar(entry: StreamEntry): boolean {
  return (entry.fields ?? []).some((part) => part.includes('\uFFFD'));
}
