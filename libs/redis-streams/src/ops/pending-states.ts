import { describeError } from '../describe-error.js';
import type { ReportCommands, RetryRecords } from '../redis/tools/report-commands.js';

/**
 * What a pending entry waits for: its retry (a record in the retry set, due later or already due),
 * a live consumer (a connection of it is open: in its handler), a peer's reclaim (its consumer has
 * no connection), or unknown (no CLIENT LIST, or the retry set could not be read).
 */
export type PendingState = 'retry-waiting' | 'retry-due' | 'live' | 'consumer-gone' | 'unknown';

export interface PendingEntryReport {
  id: string;
  /** Since its last delivery or lease renewal (a waiting entry's owner renews it too). */
  idleMs: number;
  deliveries: number;
  state: PendingState;
  /** When its retry is due, on Redis' clock (ms); null without a retry record. */
  retryDueAt: number | null;
  /** Ms until that due time on Redis' clock, negative once passed; null without a retry record. */
  retryInMs: number | null;
}

/** The group's retry set as read for the entries shown: each id's due time (null: no record), counts, or why it could not be read. */
export type RetryView = ({ known: true } & RetryRecords) | { known: false; error: string };

/**
 * Reads the retry records of `ids` (see ReportCommands.retryRecords: ZMSCORE, never the whole set),
 * Redis' clock and how many records are not yet due / past due. A missing set is no retries. A
 * refusal (NOPERM without `+zmscore +zcount +time`, WRONGTYPE) is reported, not thrown: inspect goes on.
 */
export async function readRetryView(reports: ReportCommands, stream: string, group: string, ids: readonly string[]): Promise<RetryView> {
  try {
    return { known: true, ...(await reports.retryRecords(stream, group, ids)) };
  } catch (err) {
    // A refusal, or a node that does not answer (TIME goes to any node of a cluster, maybe one just failed
    // over): the retry state is unknown, and inspect goes on with the rest.
    return { known: false, error: describeError(err) };
  }
}

/** One shown entry's state, from its retry record (if the set was read) and its consumer's connection (null: unknown). */
export function pendingEntryReport(
  row: { id: string; idleMs: number; deliveries: number },
  view: RetryView,
  connected: boolean | null,
): PendingEntryReport {
  const dueAt = view.known ? (view.dueAt.get(row.id) ?? null) : null;
  const retryInMs = view.known && dueAt !== null ? dueAt - view.now : null;
  let state: PendingState;
  if (retryInMs !== null) state = retryInMs > 0 ? 'retry-waiting' : 'retry-due';
  else if (connected === false) state = 'consumer-gone';
  else state = connected === null || !view.known ? 'unknown' : 'live';
  return { ...row, state, retryDueAt: dueAt, retryInMs };
}

/** How many of the shown entries are in each state (states with none left out). */
export function countStates(entries: readonly PendingEntryReport[]): Partial<Record<PendingState, number>> {
  const counts: Partial<Record<PendingState, number>> = {};
  for (const p of entries) counts[p.state] = (counts[p.state] ?? 0) + 1;
  return counts;
}
