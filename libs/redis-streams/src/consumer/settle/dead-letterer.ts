import type { Logger } from '../../ports.js';
import { encodeDeadLetterHead } from '../../codec/dead-letter-codec.js';
import { describeError } from '../../describe-error.js';
import { isCommandTimeout, isRefusal } from '../../redis/replies/redis-errors.js';
import type { AckDeletePolicy, StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import { within } from '../../within.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';
import { markSettleInDoubt, markSettleSent } from './settle-sent.js';
import { STOP_STEPS_WITHIN_MS } from '../stop-signal.js';
import { firstValueFrom, from, map, NEVER, race, type Observable } from 'rxjs';

const UNCONFIRMED = Symbol('unconfirmed');

export interface DeadLettererDeps {
  commands: StreamCommands;
  group: string;
  consumer: string;
  deadLetterStream: ((stream: string) => string) | false;
  logger: Logger;
  /** True once close() began: a move Redis does not confirm is then not waited for past STOP_STEPS_WITHIN_MS. */
  stopping?: () => boolean;
  /** Emits once close() began: ends the wait for a move's fate (see moveFate). */
  stopped$?: Observable<unknown>;
  /** How the move's ack deletes the entry from its stream (deleteOnAck); undefined: a plain XACK. */
  ackDelete?: () => AckDeletePolicy | undefined;
}

/**
 * Moves the entry to its dead-letter stream and acks it (one atomic script), or leaves it
 * pending when dead-lettering is disabled. The dead letter carries a copy of the entry's fields
 * (made by the script, byte for byte) unless `copy` is false or Redis refuses the letter with
 * it (a dead-letter stream's `maxmemory`, a script error): then it goes without, saying why. When Redis
 * refuses even that (the dead-letter stream's ids used up, NOPERM), the entry stays pending,
 * reported as failed, and the loop goes on: one entry never stalls the others. A move whose
 * answer is lost (timed out) is settled by what Redis says of the entry once it answers again
 * (see moveFate). Rejects when Redis could not be reached otherwise (the entry is then still
 * pending under this consumer). Once stopping, a move Redis does not confirm in time is
 * reported as failed, not waited for.
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
  // The head of the letter last sent: what finds it again when the move's answer is lost (its deadAt to the ms).
  const sent: { head?: string[] } = {};
  const moving = moveWithFallback(deps, entry, deadStream, reason, copy, stack, sent);
  let moved: Awaited<typeof moving> | typeof UNCONFIRMED | { unknown: string };
  try {
    moved = deps.stopping?.()
      ? await within<Awaited<typeof moving> | typeof UNCONFIRMED>(moving, STOP_STEPS_WITHIN_MS, UNCONFIRMED)
      : await moving;
  } catch (err) {
    if (!isCommandTimeout(err)) throw err;
    // Sent and not answered (a frozen Redis): the script runs if and when Redis gets to it. Its fate is read behind it,
    // once Redis answers. A restart of the loop instead would cost the read's other entries a delivery each (its
    // self-drain re-reads them); settled as failed, an entry whose move ran would be retried, an ordered key held.
    deps.logger.warn(
      `${where}: ${reason}; its dead-letter move to "${deadStream}" got no answer (${describeError(err)}): waiting for Redis to tell whether it ran`,
    );
    moved = await moveFate(deps, entry, deadStream, sent.head ?? []);
  }
  if (moved === UNCONFIRMED) {
    moving.catch(() => {}); // a late failure, after the bound, is nobody's to handle
    deps.logger.error(
      `${where}: ${reason}; its dead-letter move to "${deadStream}" was not confirmed by Redis within ${STOP_STEPS_WITHIN_MS} ms of stopping: the move is one atomic script, so either it happened or the entry is still pending under consumer "${deps.consumer}"`,
    );
    return { ...base, outcome: 'failed', error };
  }
  if (typeof moved === 'object' && moved !== null && 'unknown' in moved) {
    markSettleInDoubt(entry);
    deps.logger.error(
      `${where}: ${reason}; its dead-letter move to "${deadStream}" got no answer, and the entry is no longer pending, but its letter was not found (${moved.unknown}): the move may have run (its letter older than the stream's newest 100, or not readable), or an operator's XACK or a peer settled it first; settled as failed, not retried here`,
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
  sent: { head?: string[] },
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
    // As Redis will hand it back: UTF-8 both ways (a lone surrogate, half an emoji cut by describeError, comes back as U+FFFD).
    sent.head = fields.map((v) => Buffer.from(v, 'utf8').toString('utf8'));
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

/**
 * What became of a move whose answer was lost (its command timed out), asked on the same connection (behind the
 * script, so after it ran), again while Redis does not answer, until stopping: the entry's XPENDING row, and when
 * it is no longer pending, the letter with the head that was sent (`head`: its deadAt and error make it this move's)
 * among the dead-letter stream's newest. The letter's id: moved. null: not this consumer's when the move ran (a peer's
 * now, or no such letter in the whole dead-letter stream: an operator's XACK, XGROUP DELCONSUMER or a re-created group
 * came first, and the move wrote nothing; or its letter was trimmed or deleted before the look, which reads the same:
 * a second letter then, see docs/failure-semantics.md). `unknown`: not pending, and no such letter among the newest looked at (or
 * the look refused: NOPERM, WRONGTYPE): the move may have run. Pending here still: the move did not happen (refused).
 * Rejects when the XPENDING fails otherwise (a lost group, a dropped connection): the loop's restart finds out then.
 */
async function moveFate(
  deps: DeadLettererDeps,
  entry: StreamEntry,
  deadStream: string,
  head: readonly string[],
): Promise<string | null | typeof UNCONFIRMED | { refused: unknown } | { unknown: string }> {
  const stopped$ = deps.stopped$ ?? NEVER;
  const ask = async (): Promise<string | null | { refused: unknown } | { unknown: string }> => {
    const [row] = await deps.commands.fetch.pendingRows([entry]);
    if (row === undefined) {
      return deps.commands.newestWith(deadStream, head).then(
        (id) => (id === undefined ? { unknown: 'not among the newest 100' } : id),
        (err: unknown) => {
          if (isCommandTimeout(err)) throw err;
          return { unknown: `the look refused: ${describeError(err)}` };
        },
      );
    }
    if (row.consumer !== deps.consumer) return null;
    return { refused: new Error('its move got no answer, and the entry is still pending under this consumer') };
  };
  for (;;) {
    if (deps.stopping?.()) return UNCONFIRMED;
    const answer = await firstValueFrom(race(from(ask()), stopped$.pipe(map(() => 'stopping' as const)))).catch((err: unknown) => {
      if (isCommandTimeout(err)) return 'unanswered' as const;
      throw err;
    });
    if (answer === 'stopping') return UNCONFIRMED;
    if (answer !== 'unanswered') return answer;
  }
}
