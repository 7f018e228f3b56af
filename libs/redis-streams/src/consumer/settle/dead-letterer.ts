import type { Logger } from '../../ports.js';
import { encodeDeadLetterHead } from '../../codec/dead-letter-codec.js';
import { describeError } from '../../describe-error.js';
import { isCommandTimeout, isRefusal } from '../../redis/replies/redis-errors.js';
import type { AckDeletePolicy, StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import { within } from '../../within.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import { markSettleSent } from './settle-sent.js';
import { STOP_STEPS_WITHIN_MS } from '../stop-signal.js';

const UNCONFIRMED = Symbol('unconfirmed');

export interface DeadLettererDeps {
  commands: StreamCommands;
  group: string;
  consumer: string;
  deadLetterStream: ((stream: string) => string) | false;
  logger: Logger;
  /** True once close() began: a move Redis does not confirm is then not waited for past STOP_STEPS_WITHIN_MS. */
  stopping?: () => boolean;
  /** How the move's ack deletes the entry from its stream (deleteOnAck); undefined: a plain XACK. */
  ackDelete?: () => AckDeletePolicy | undefined;
}

/**
 * Moves the entry to its dead-letter stream and acks it (one atomic script), or leaves it
 * pending when dead-lettering is disabled. The dead letter carries a copy of the entry's fields
 * (made by the script, byte for byte) unless `copy` is false or Redis refuses the letter with
 * it (a dead-letter stream's `maxmemory`, a script error): then it goes without, saying why. When Redis
 * refuses even that (the dead-letter stream's ids used up, NOPERM), the entry stays pending,
 * reported as failed, and the loop goes on: one entry never stalls the others. Rejects when
 * Redis could not be reached (a move that timed out is logged as unconfirmed first: it may still
 * run); once stopping, a move Redis does not confirm in time is reported as failed, not waited for.
 */
export async function deadLetter(
  deps: DeadLettererDeps,
  entry: StreamEntry,
  source: DeliverySource,
  reason: string,
  error: unknown = new Error(reason),
  copy = true,
  // A handler's failure (see handlerStack): kept in the letter, and logged beside the line unless `logStack` is false.
  stack?: string,
  logStack = true,
): Promise<SettledEvent> {
  const base = { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source };
  const logged = logStack ? stack : undefined;
  const where = `entry ${entry.id} of stream "${entry.stream}" (delivery ${entry.deliveryCount})`;
  if (!deps.deadLetterStream) {
    deps.logger.error(`${where}: ${reason}; dead-lettering is disabled, left pending`, logged);
    return { ...base, outcome: 'failed', error };
  }
  const deadStream = deps.deadLetterStream(entry.stream);
  const moving = moveWithFallback(deps, entry, deadStream, reason, copy, stack);
  const moved = await (
    deps.stopping?.() ? within<Awaited<typeof moving> | typeof UNCONFIRMED>(moving, STOP_STEPS_WITHIN_MS, UNCONFIRMED) : moving
  ).catch((err: unknown) => {
    // Sent and not answered (a frozen Redis): the script may still run when Redis gets to it. Said for this entry; the
    // failure stays the loop's, whose restart reads what is pending. (Settled as 'failed' here, the entry would be
    // retried even once the move ran, and an ordered key would wait for a retry that never comes.)
    if (isCommandTimeout(err))
      deps.logger.error(
        `${where}: ${reason}; its dead-letter move to "${deadStream}" was not confirmed by Redis (${describeError(err)}): the move is one atomic script, so either it runs once Redis gets to it or the entry stays pending under consumer "${deps.consumer}"`,
      );
    throw err;
  });
  if (moved === UNCONFIRMED) {
    moving.catch(() => {}); // a late failure, after the bound, is nobody's to handle
    deps.logger.error(
      `${where}: ${reason}; its dead-letter move to "${deadStream}" was not confirmed by Redis within ${STOP_STEPS_WITHIN_MS} ms of stopping: the move is one atomic script, so either it happened or the entry is still pending under consumer "${deps.consumer}"`,
    );
    return { ...base, outcome: 'failed', error };
  }
  if (typeof moved !== 'string' && moved !== null) {
    // Still pending: it comes back through reclaim after minIdleMs and is tried again then.
    const why = describeError(moved.refused);
    deps.logger.error(`${where}: ${reason}; could not be dead-lettered to "${deadStream}" (${why}), left pending`, logged);
    return { ...base, outcome: 'failed', error: new Error(`${where} could not be dead-lettered: ${why}`, { cause: moved.refused }) };
  }
  const deadId = moved;
  if (deadId === null) {
    // A peer reclaimed it (our lease lapsed) or it was acked: it is theirs to settle now.
    deps.logger.warn(`${where}: not dead-lettered, this consumer no longer owns it`);
    return { ...base, outcome: 'failed', error };
  }
  deps.logger.error(`${where}: ${reason}; moved to "${deadStream}" as ${deadId}`, logged);
  return { ...base, outcome: 'dead-lettered', error, deadLetterId: deadId };
}

/**
 * The move, with the copy of the entry's fields when asked, else (or when Redis refuses the
 * letter with it) without: the letter's id, null when this consumer no longer owns the entry,
 * or Redis' refusal of both. Rejects when Redis could not be reached.
 */
async function moveWithFallback(
  deps: DeadLettererDeps,
  entry: StreamEntry,
  deadStream: string,
  reason: string,
  copy: boolean,
  stack: string | undefined,
): Promise<string | null | { refused: unknown }> {
  const letter = (omitted?: string) =>
    encodeDeadLetterHead({
      stream: entry.stream,
      sourceId: entry.id,
      group: deps.group,
      consumer: deps.consumer,
      deliveryCount: entry.deliveryCount,
      error: omitted === undefined ? reason : `${reason} (the entry's fields were not copied: ${omitted})`,
      deadAt: Date.now(),
      ...(stack ? { stack } : {}),
    });
  // The copy is made by the script, from the bytes Redis holds (not from the decoded strings).
  const move = (fields: string[], withCopy: boolean) => {
    // From here on no audit of this consumer may take the entry back (see settle-sent.ts).
    markSettleSent(entry);
    const args = withCopy ? fields : [...fields, 'fields', '[]'];
    return deps.commands.deadLetter(entry.stream, deadStream, deps.consumer, entry.id, args, withCopy, deps.ackDelete?.());
  };
  try {
    return await move(letter(copy ? undefined : 'too large'), copy);
  } catch (err) {
    if (!isRefusal(err)) throw err;
    if (!copy) return { refused: err };
    try {
      return await move(letter(describeError(err)), false);
    } catch (again) {
      if (!isRefusal(again)) throw again;
      return { refused: again };
    }
  }
}
