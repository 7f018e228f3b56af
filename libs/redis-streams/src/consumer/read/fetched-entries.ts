import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import { someIds } from '../../id-list.js';
import { isRefusal } from '../../redis/replies/redis-errors.js';
import type { PendingRow } from '../../redis/replies/replies.js';
import { groupIds, type StreamEntry } from '../../stream-entry.js';
import type { Logger } from '../../ports.js';
import type { StreamCommands } from '../../redis/stream-commands.js';
import type { Custody } from '../custody/custody.js';

/** What sorting fetched entries reads: the custody's view of them, and the commands that look them up. */
export interface ArrivalDeps {
  custody: Pick<Custody, 'deleted' | 'release' | 'waiting' | 'adopt' | 'leftToGroup'>;
  commands: Pick<StreamCommands, 'ackMany' | 'fetch' | 'retries' | 'audit'>;
  consumer: string;
  maxWaitingRetries: number;
  minIdleMs: number;
  logger: Logger;
  /** An entry adopted to wait for its retry (an ordered reader blocks its key behind it). */
  onWaiting?: ((entry: StreamEntry) => void) | undefined;
}

/**
 * A pending entry trimmed from the stream reads back without fields: nothing is left to
 * handle, so it is reported like XAUTOCLAIM's deleted ids and acked out of the PEL.
 */
export async function dropDeleted(p: ArrivalDeps, entries: StreamEntry[]): Promise<StreamEntry[]> {
  const deleted = entries.filter((e) => e.fields === null);
  if (deleted.length === 0) return entries;
  for (const [stream, ids] of groupIds(deleted)) p.custody.deleted(stream, ids);
  await p.commands.ackMany(deleted);
  return entries.filter((e) => e.fields !== null);
}

/**
 * Drained and reclaimed entries were delivered before: their exact counts (`counted`: read
 * with them; the others, or all without it, one XPENDING per entry, one round trip). An entry that
 * is another consumer's now (an XCLAIM by hand) is not ours to settle: it is dropped from the batch,
 * never given a made-up count. One in nobody's pending list was dropped from it since this consumer
 * fetched it a moment ago (an XGROUP DELCONSUMER of it, or an XACK by hand: no peer can have claimed
 * it, idle 0 since): it is taken back (see takenBack), not skipped as settled.
 */
export async function withDeliveryCounts(p: ArrivalDeps, entries: StreamEntry[], counted = false): Promise<StreamEntry[]> {
  const { commands, consumer, logger } = p;
  const rows: (PendingRow | undefined)[] = counted ? entries.map((e) => ownRow(e.deliveryCount, consumer)) : [];
  // Not counted yet (or not where expected): one XPENDING each, exactly.
  const unknown = counted ? entries.filter((_, i) => rows[i] === undefined) : entries;
  if (unknown.length > 0) {
    const found = await commands.fetch.pendingRows(unknown);
    let next = 0;
    entries.forEach((_, i) => {
      if (rows[i] === undefined) rows[i] = found[next++];
    });
  }
  const kept = new Set<StreamEntry>();
  const dropped: StreamEntry[] = [];
  entries.forEach((e, i) => {
    const row = rows[i];
    if (row && row.consumer === consumer) {
      e.deliveryCount = row.deliveryCount;
      kept.add(e);
      return;
    }
    if (!row) {
      dropped.push(e);
      return;
    }
    p.custody.release(e);
    logger.warn(
      `entry ${e.id} of "${e.stream}" is no longer pending under this consumer (now "${escapeControl(row.consumer)}"'s): skipped`,
    );
  });
  if (dropped.length > 0) for (const e of await takenBack(p, dropped)) kept.add(e);
  return kept.size === entries.length ? entries : entries.filter((e) => kept.has(e));
}

/**
 * Entries just fetched and already in nobody's pending list, made pending under this consumer
 * again with their counts (AUDIT_SCRIPT, as in hand with a re-own allowed); the ones it could not
 * take back (another's now, gone from the stream, above a group re-created lower) are released.
 */
async function takenBack(p: ArrivalDeps, dropped: readonly StreamEntry[]): Promise<StreamEntry[]> {
  const { commands, consumer, custody, logger } = p;
  const back: StreamEntry[] = [];
  for (const stream of new Set(dropped.map((e) => e.stream))) {
    const mine = dropped.filter((e) => e.stream === stream);
    // A count not read yet (a reclaim's, whose XPENDING found nothing): at least the delivery this fetch was.
    const counts = mine.map((e) => Math.max(1, e.deliveryCount));
    const result = await commands.audit(
      stream,
      consumer,
      undefined,
      mine.map((e, i) => ({ id: e.id, kind: 'held' as const, reown: true, count: counts[i]! })),
    );
    const taken: string[] = [];
    mine.forEach((e, i) => {
      const f = result?.findings[i];
      if (f?.status === 'reowned' || f?.status === 'mine') {
        e.deliveryCount = counts[i]!;
        back.push(e);
        if (f.status === 'reowned') taken.push(e.id);
        return;
      }
      // Gone with the stream or the group (no result), or above a group re-created lower: the loop's own path finds out.
      custody.release(e);
      if (f?.status === 'deleted') custody.deleted(stream, [e.id]);
      else if (f?.status === 'other')
        logger.warn(`entry ${e.id} of "${stream}" is no longer pending under this consumer (now "${escapeControl(f.owner)}"'s): skipped`);
    });
    if (taken.length > 0)
      logger.warn(
        `${taken.length === 1 ? 'entry' : 'entries'} ${someIds(taken)} of "${stream}" ${taken.length === 1 ? 'was' : 'were'} in nobody's pending list just after this consumer fetched ${taken.length === 1 ? 'it' : 'them'} (XGROUP DELCONSUMER of this consumer, or an XACK by hand): taken back`,
      );
  }
  return back;
}

function ownRow(deliveryCount: number, consumer: string): PendingRow | undefined {
  return deliveryCount > 0 ? { consumer, deliveryCount } : undefined;
}

/**
 * Of entries self-drain or reclaim just delivered (with their counts), the ones to settle now.
 * One waiting for a scheduled retry not yet due (its consumer stopped, died, or is this one
 * restarted) is adopted instead: it stays pending under this consumer with the count it had
 * (this delivery was no try), owed, and is tried at its due time (see ADOPT_RETRY_SCRIPT).
 * `retriesWaiting` false (no retry set exists, read with the entries): nothing to look up.
 */
export async function withoutWaiting(p: ArrivalDeps, entries: StreamEntry[], retriesWaiting = true): Promise<StreamEntry[]> {
  if (entries.length === 0 || !retriesWaiting) return entries;
  const { commands, custody, logger } = p;
  const skip = new Set<StreamEntry>();
  for (const [stream, ids] of groupIds(entries)) {
    const mine = entries.filter((e) => e.stream === stream);
    // Adopted ones stay below maxWaitingRetries: a stopped peer's wait list must not stop this consumer's intake
    // (only its own failures, a downstream failing for it too, may).
    const room = Math.max(0, p.maxWaitingRetries - 1 - custody.waiting);
    const waits = await commands.retries.adopt(stream, p.consumer, mine, room, p.minIdleMs).catch((err: unknown) => {
      if (!isRefusal(err)) throw err;
      // An ACL from before retries: nothing can be waiting that this consumer could see; tried now.
      logger.error(
        `could not look for entries of "${stream}" waiting for a retry (${describeError(err)}; see docs/guide/security.md): tried now`,
      );
      return mine.map(() => -1);
    });
    let first = Infinity;
    let adopted = 0;
    const left: string[] = [];
    mine.forEach((e, i) => {
      const wait = waits[i]!;
      if (wait === -1) return;
      skip.add(e);
      custody.release(e);
      if (wait === -2) {
        left.push(e.id);
        return;
      }
      adopted++;
      custody.adopt(stream, e.id, Math.max(0, e.deliveryCount - 1), wait);
      p.onWaiting?.(e);
      first = Math.min(first, wait);
    });
    if (adopted > 0)
      logger.log(
        `${adopted} of ${ids.length} entries taken from "${stream}" wait for a retry not yet due (their consumer stopped or died while they waited): kept waiting here, the first in ${first} ms`,
      );
    if (left.length > 0) custody.leftToGroup(stream, left);
  }
  return skip.size === 0 ? entries : entries.filter((e) => !skip.has(e));
}
