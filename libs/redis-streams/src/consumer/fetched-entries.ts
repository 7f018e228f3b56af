import { escapeControl } from '../escape-control.js';
import { groupIds, type StreamEntry } from '../redis/stream-entry.js';
import type { LoopParts } from './loop-parts.js';

/** Entries trimmed from their stream, reported once: the audit will not report them again when it meets them. */
export function reportDeleted(p: LoopParts, stream: string, ids: string[]): void {
  p.audit.deletedElsewhere(stream, ids);
  p.d.onDeleted(stream, ids);
}

/**
 * A pending entry trimmed from the stream reads back without fields: nothing is left to
 * handle, so it is reported like XAUTOCLAIM's deleted ids and acked out of the PEL.
 */
export async function dropDeleted(p: LoopParts, entries: StreamEntry[]): Promise<StreamEntry[]> {
  const deleted = entries.filter((e) => e.fields === null);
  if (deleted.length === 0) return entries;
  for (const [stream, ids] of groupIds(deleted)) reportDeleted(p, stream, ids);
  await p.d.commands.ackMany(deleted);
  return entries.filter((e) => e.fields !== null);
}

/**
 * Drained and reclaimed entries were delivered before: their exact counts (one XPENDING per
 * entry, one round trip). An entry that is no longer this consumer's (a peer took it, or it
 * was acked meanwhile) is not ours to settle: it is dropped from the batch, never given a
 * made-up count.
 */
export async function withDeliveryCounts(p: LoopParts, entries: StreamEntry[]): Promise<StreamEntry[]> {
  const { commands, options, logger } = p.d;
  const rows = await commands.pendingRows(entries);
  const kept: StreamEntry[] = [];
  entries.forEach((e, i) => {
    const row = rows[i];
    if (row && row.consumer === options.consumer) {
      e.deliveryCount = row.deliveryCount;
      kept.push(e);
      return;
    }
    p.lease.drop(e);
    logger.warn(
      `entry ${e.id} of "${e.stream}" is no longer pending under this consumer (${row ? `now "${escapeControl(row.consumer)}"'s` : 'acked'}): skipped`,
    );
  });
  return kept;
}
