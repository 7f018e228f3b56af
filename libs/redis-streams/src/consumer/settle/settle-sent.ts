import type { StreamEntry } from '../../stream-entry.js';

/**
 * An entry whose dead-letter move has been sent: a slot only this module names, as the lease's
 * mark is (the move is rare; the ack path marks its batch with the lease instead, see
 * Lease.ackSent). Every command goes on one connection, in order: an audit sent after the
 * move runs after it, so it must not take the entry back (it would be pending, and run, again).
 */
const SENT = Symbol('settle sent');
type Marked = StreamEntry & { [SENT]?: true };

export function markSettleSent(entry: StreamEntry): void {
  (entry as Marked)[SENT] = true;
}

export function settleSent(entry: StreamEntry): boolean {
  return (entry as Marked)[SENT] === true;
}
