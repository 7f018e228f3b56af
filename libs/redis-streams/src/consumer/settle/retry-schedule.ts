import type { Logger } from '../../ports.js';
import { describeError } from '../../describe-error.js';
import { checkedDelay, type RetryDelay } from '../../options/retry-options.js';
import { isRefusal } from '../../redis/replies/redis-errors.js';
import type { StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import { retryLaterDelay } from '../../retry-later-mark.js';
import { rateLimitedDelay } from '../../rate-limited-mark.js';
import { leaseConfirmedAt } from '../custody/lease.js';
import type { SettledEvent } from './settled-event.js';

export interface RetryScheduleDeps {
  commands: StreamCommands;
  /** This consumer: a record is written only for an entry still pending under it. */
  consumer: string;
  logger: Logger;
  /** The server's policy (`retry`); a pattern's own (its origin's) wins. */
  retry: RetryDelay | undefined;
  originOf: (stream: string) => { retry?: RetryDelay | undefined };
  /** Without a policy: a failed entry is claimed back once idle `minIdleMs − leaseRenewMs`, about this long after its failure. */
  unscheduledRetryInMs: number;
}

/** When a failed entry is tried again; `scheduled`: at a time of its own (recorded in the retry set), not the idle-time default. */
export interface RetryTime {
  retryInMs: number;
  scheduled: boolean;
  /** Why an unscheduled one is (no policy, or one that gave no usable delay); for the log line. */
  why?: string;
}

/**
 * Failed events whose retry has a time of its own: the consumer keeps them waiting until then (see DeliveryMarks),
 * with when the time was given (performance.now()): the retry is due `retryInMs` after it, however late the event is
 * settled (a failure settled after the rest of its batch: see the batch settler).
 */
const scheduledEvents = new WeakMap<SettledEvent, number>();

export function markScheduled(event: SettledEvent): SettledEvent {
  scheduledEvents.set(event, performance.now());
  return event;
}

export const isScheduled = (event: SettledEvent): boolean => scheduledEvents.has(event);

/** When a scheduled failure's retry is due (performance.now()); undefined for one without a time of its own. */
export function scheduledRetryAt(event: SettledEvent): number | undefined {
  const at = scheduledEvents.get(event);
  return at === undefined ? undefined : at + (event.retryInMs ?? 0);
}

/** Failures whose promise only waits for their retry record (retryTime's never rejects; the logger is guarded: guarded-logger.ts). */
const recordingFailures = new WeakSet<Promise<SettledEvent>>();

/** Marks `failure` as waiting only for its retry record: its caller may start the next entry meanwhile. */
export function markRecording(failure: Promise<SettledEvent>): Promise<SettledEvent> {
  recordingFailures.add(failure);
  return failure;
}

export const isRecording = (failure: Promise<SettledEvent>): boolean => recordingFailures.has(failure);

/**
 * The next try of an entry whose handler failed: the delay a RetryLaterException asks for, else
 * the pattern's or the server's policy, recorded in Redis (the retry set, on Redis' clock) so
 * that a peer that takes the entry after this consumer dies keeps the schedule. No policy: the
 * idle-time default. A record Redis does not take is logged: the retry still waits here, but a
 * peer that takes the entry after this consumer dies tries it at once.
 */
export function retryTime(deps: RetryScheduleDeps, entry: StreamEntry, error: unknown): RetryTime | Promise<RetryTime> {
  const delay = chosenDelay(deps, entry, error);
  if (typeof delay === 'string') return { retryInMs: deps.unscheduledRetryInMs, scheduled: false, why: delay };
  // Not recorded when a peer took the entry since (one delivery more) or the group lost it: its retry is then the
  // peer's, or taken back with the group (see SCHEDULE_RETRY_SCRIPT); it is owed here all the same. Recorded when an
  // operator's XCLAIM … JUSTID gave it to another consumer meanwhile: nobody else keeps its retry. Taken back and
  // recorded when an XGROUP DELCONSUMER dropped it while in hand, if its lease knew it this consumer's a moment ago
  // (no peer can have taken and settled it since): else a kill before the audit takes it back would lose it.
  // A handler's RateLimitedException: the delivery is put back, so it never counts toward maxDeliveries. Not one whose
  // delay is unusable (-1, NaN): that is an ordinary failure, counted, or it would be tried forever.
  const uncounted = typeof checkedDelay(rateLimitedDelay(error)) === 'number';
  const confirmedAt = leaseConfirmedAt(entry);
  const reown = confirmedAt !== undefined && performance.now() - confirmedAt < deps.unscheduledRetryInMs;
  return deps.commands.retries
    .schedule(entry.stream, entry.id, delay, deps.consumer, { uncounted, deliveryCount: entry.deliveryCount, reown })
    .then(
      () => ({ retryInMs: delay, scheduled: true }),
      (err: unknown) => {
        if (isRefusal(err)) {
          // NOPERM (an ACL from before retries), OOM: no schedule a peer could keep, so the idle-time default.
          deps.logger.error(
            `entry ${entry.id} of "${entry.stream}": Redis refused its retry record (${describeError(err)}; the consumer needs the retry set, see docs/guide/security.md): it comes back once idle ${deps.unscheduledRetryInMs} ms instead`,
          );
          return { retryInMs: deps.unscheduledRetryInMs, scheduled: false, why: 'Redis refused the retry record' };
        }
        deps.logger.warn(
          `entry ${entry.id} of "${entry.stream}": its retry in ${delay} ms was not recorded in Redis (${describeError(err)}); it waits here, but a peer that takes it after this consumer stops tries it at once`,
        );
        return { retryInMs: delay, scheduled: true };
      },
    );
}

/** The delay, or why there is none (the idle-time default then). */
function chosenDelay(deps: RetryScheduleDeps, entry: StreamEntry, error: unknown): number | string {
  const where = `entry ${entry.id} of "${entry.stream}"`;
  const asked = rateLimitedDelay(error) ?? retryLaterDelay(error);
  if (asked !== undefined) {
    const delay = checkedDelay(asked);
    if (typeof delay === 'number') return delay;
    const which = rateLimitedDelay(error) === undefined ? 'RetryLaterException' : 'RateLimitedException';
    deps.logger.warn(`${where}: ${which}: ${delay}; the retry policy applies instead (a failure, counted)`);
  }
  const policy = deps.originOf(entry.stream).retry ?? deps.retry;
  if (!policy) return 'no retry policy';
  let delay: number | string;
  try {
    delay = checkedDelay(policy(entry.deliveryCount, error));
  } catch (err) {
    delay = `the retry policy threw: ${describeError(err)}`;
  }
  if (typeof delay === 'number') return delay;
  deps.logger.warn(`${where}: ${delay}; it comes back once idle minIdleMs − leaseRenewMs instead`);
  return 'the retry policy gave no usable delay';
}
