import { decodeDeadLetter } from '../codec/dead-letter-codec.js';
import { describeError } from '../describe-error.js';
import { deadLetterNamesOf } from '../key-names.js';
import { isErrorReply, isNoSuchKey, isWrongType } from '../redis/replies/redis-errors.js';
import { compareIds } from '../redis/stream-ids.js';
import type { DashboardCommands } from '../redis/tools/dashboard-commands.js';
import type { EntryCommands } from '../redis/tools/entry-commands.js';
import type { ReportCommands } from '../redis/tools/report-commands.js';
import { readRetryView } from './pending-states.js';

/**
 * Where one entry stands in one group, as far as Redis tells: `unread` (past the group's cursor, never
 * delivered to it), `pending` (delivered, not acked), `retry-waiting` / `retry-due` (pending, with a record
 * in the group's retry set), `dead-lettered` (not pending, and a letter of it names this group), `acked`
 * (the cursor is past it and it is not pending: acked, or taken off the pending list by hand: Redis keeps
 * no trace that tells the two apart), `not-pending` (as `acked`, but the letter search stopped short or failed: its
 * letter may lie past what was read).
 */
export type EntryGroupStateName = 'unread' | 'pending' | 'retry-waiting' | 'retry-due' | 'dead-lettered' | 'acked' | 'not-pending';

export interface EntryGroupState {
  group: string;
  state: EntryGroupStateName;
  lastDeliveredId: string;
  /** While pending: its owner, ms since its last delivery (or lease renewal), how many times it was delivered, whether its owner has a connection open (null: unknown). */
  pending: { owner: string; idleMs: number; deliveries: number; ownerConnected: boolean | null } | null;
  /** Its record in the group's retry set: when its retry is due (Unix ms, Redis' clock) and in how long (negative: past due). */
  retry: { dueAt: number; inMs: number } | null;
  /** Why the retry set could not be read (its state is then told without it). */
  retryUnknown?: string;
}

/** A letter of the entry: where, why (reason and stack cut at `reasonBytes`), by whom, after how many deliveries. */
export interface EntryLetter {
  deadStream: string;
  id: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  error: string;
  stack?: string;
  deadAt: number;
  errorTruncated: boolean;
  stackTruncated: boolean;
}

export interface EntryState {
  stream: string;
  id: string;
  /** Whether the entry is in its stream (not trimmed, deleted, or acked with deleteOnAck). */
  inStream: boolean;
  /** Redis' clock when read (ms): due times are on it. */
  now: number;
  groups: EntryGroupState[];
  letters: EntryLetter[];
  /** The search of the default dead-letter streams: letters read, and whether it reached their ends (else a letter may lie past it); or why it failed. */
  letterSearch: { read: number; complete: boolean } | { error: string };
}

/**
 * One entry's state in each group of its stream, and its letters in the default dead-letter streams:
 * XINFO GROUPS, one XPENDING of one id and one ZMSCORE per group, one CLIENT LIST per master, a
 * bounded search per dead-letter stream (LETTERS_OF_SCRIPT). Nothing is read whole.
 */
export async function readEntryState(
  deps: { reports: ReportCommands; entries: EntryCommands; dashboard: DashboardCommands },
  stream: string,
  id: string,
  reasonBytes: number,
): Promise<EntryState> {
  const { reports, dashboard } = deps;
  const groups = await reports.groups(stream).catch((err: unknown) => {
    if (isNoSuchKey(err) || isWrongType(err)) return [];
    throw err;
  });
  // Its id alone (no value read: an entry of megabytes costs nothing here).
  const inStream = (await dashboard.rangePreview(stream, id, id, 1, 0)).length > 0;
  const connected = await dashboard.connectedByGroup().catch((err: unknown) => {
    if (isErrorReply(err)) return null;
    throw err;
  });
  const { letters, search } = await lettersOf(deps, stream, id, reasonBytes);
  let now = Date.now();
  const states: EntryGroupState[] = [];
  for (const g of groups) {
    const row = await reports.pendingEntry(stream, g.name, id);
    const view = row ? await readRetryView(reports, stream, g.name, [id]) : null;
    if (view?.known) now = view.now;
    const dueAt = view?.known ? (view.dueAt.get(id) ?? null) : null;
    const retry = view?.known && dueAt !== null ? { dueAt, inMs: dueAt - view.now } : null;
    let state: EntryGroupStateName;
    if (row) state = retry ? (retry.inMs > 0 ? 'retry-waiting' : 'retry-due') : 'pending';
    else if (compareIds(id, g.lastDeliveredId) > 0) state = 'unread';
    else if (letters.some((l) => l.group === g.name)) state = 'dead-lettered';
    // A search stopped short may have missed its letter: not pending, and no more is known.
    else state = 'complete' in search && search.complete ? 'acked' : 'not-pending';
    states.push({
      group: g.name,
      state,
      lastDeliveredId: g.lastDeliveredId,
      pending: row
        ? {
            owner: row.consumer,
            idleMs: row.idleMs,
            deliveries: row.deliveryCount,
            ownerConnected: connected === null ? null : (connected.get(g.name)?.has(row.consumer) ?? false),
          }
        : null,
      retry,
      ...(view && !view.known ? { retryUnknown: view.error } : {}),
    });
  }
  return { stream, id, inStream, now, groups: states, letters, letterSearch: search };
}

async function lettersOf(
  deps: { entries: EntryCommands; dashboard: DashboardCommands },
  stream: string,
  id: string,
  reasonBytes: number,
): Promise<{ letters: EntryLetter[]; search: EntryState['letterSearch'] }> {
  const letters: EntryLetter[] = [];
  let read = 0;
  let complete = true;
  try {
    for (const dead of deadLetterNamesOf(stream)) {
      const found = await deps.entries.lettersOf(dead, stream, id);
      read += found.read;
      if (found.stoppedAt !== null) complete = false;
      for (const letterId of found.ids) {
        const [row] = await deps.dashboard.rangePreview(dead, letterId, letterId, 1, reasonBytes);
        if (!row) continue;
        const { fields: _fields, ...letter } = decodeDeadLetter(row.id, row.fields);
        const size = (name: string) => {
          for (let i = 0; i + 1 < row.fields.length; i += 2) if (row.fields[i] === name) return row.sizes[i + 1] ?? 0;
          return 0;
        };
        letters.push({
          deadStream: dead,
          id: row.id,
          group: letter.group,
          consumer: letter.consumer,
          deliveryCount: letter.deliveryCount,
          error: letter.error,
          ...(letter.stack !== undefined ? { stack: letter.stack } : {}),
          deadAt: letter.deadAt,
          errorTruncated: size('error') > reasonBytes,
          stackTruncated: size('stack') > reasonBytes,
        });
      }
    }
  } catch (err) {
    if (!isErrorReply(err)) throw err;
    return { letters, search: { error: describeError(err) } };
  }
  return { letters, search: { read, complete } };
}
