import { describeError } from '../describe-error.js';
import { escapeControl } from '../escape-control.js';
import { isRefusal } from '../redis/redis-errors.js';
import type { PendingRow } from '../redis/replies.js';
import { groupIds, type StreamEntry } from '../stream-entry.js';
import type { Logger } from '../ports.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { Custody } from './custody.js';

/** What sorting fetched entries reads: the custody's view of them, and the commands that look them up. */
export interface ArrivalDeps {
  custody: Pick<Custody, 'deleted' | 'release' | 'waiting' | 'adopt' | 'leftToGroup'>;
  commands: Pick<StreamCommands, 'ackMany' | 'fetch' | 'retries'>;
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
 * with them; the others, or all without it, one XPENDING per entry, one round trip). An entry that is no longer this consumer's (a peer took it, or it was
 * acked meanwhile) is not ours to settle: it is dropped from the batch, never given a made-up
 * count.
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
  const kept: StreamEntry[] = [];
  entries.forEach((e, i) => {
    const row = rows[i];
    if (row && row.consumer === consumer) {
      e.deliveryCount = row.deliveryCount;
      kept.push(e);
      return;
    }
    p.custody.release(e);
    logger.warn(
      `entry ${e.id} of "${e.stream}" is no longer pending under this consumer (${row ? `now "${escapeControl(row.consumer)}"'s` : 'acked'}): skipped`,
    );
  });
  return kept;
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
