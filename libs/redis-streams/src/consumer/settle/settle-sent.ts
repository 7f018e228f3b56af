import type { StreamEntry } from '../../stream-entry.js';

/** A flag on an entry that only this module names (its settle is rare: no field on every entry). */
function entryFlag(name: string): { set(entry: StreamEntry): void; has(entry: StreamEntry): boolean } {
  const key = Symbol(name);
  type Flagged = StreamEntry & { [key]?: true };
  return {
    set: (entry) => void ((entry as Flagged)[key] = true),
    has: (entry) => (entry as Flagged)[key] === true,
  };
}

/**
 * An entry whose dead-letter move has been sent (the ack path marks its batch with the lease instead, see
 * Lease.ackSent). Every command goes on one connection, in order: an audit sent after the move runs after it, so it
 * must not take the entry back (it would be pending, and run, again).
 */
const sent = entryFlag('settle sent');
export const markSettleSent = sent.set;
export const settleSent = sent.has;

/**
 * An entry whose dead-letter move got no answer, found after no longer pending with no letter of its own in sight
 * (see moveFate): the move may have run. Settled as failed, it is not owed (no retry, no take-back from nobody's
 * pending list: that would write a second letter), and an ordered key does not wait for it.
 */
const inDoubt = entryFlag('settle in doubt');
export const markSettleInDoubt = inDoubt.set;
export const settleInDoubt = inDoubt.has;
