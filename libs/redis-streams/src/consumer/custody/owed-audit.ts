import { escapeControl } from '../../escape-control.js';
import { someIds } from '../../id-list.js';
import type { AuditResult } from '../../redis/replies/replies.js';
import type { AuditKind, StreamCommands } from '../../redis/stream-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { Logger } from '../../ports.js';
import type { DeliveryMarks, Owed } from './delivery-marks.js';
import type { Lease } from './lease.js';

/** What auditing owed entries reads and reports to (PendingAudit's deps hold these). */
export interface OwedAuditDeps {
  commands: StreamCommands;
  lease: Lease;
  marks: DeliveryMarks;
  consumer: string;
  minIdleMs: number;
  logger: Logger;
  onDeleted: (stream: string, ids: string[]) => void;
  /** False: `stream` is not this consumer's now (a partition it lost): nothing in nobody's pending list is taken back, not even by a rejoin. */
  mayTakeBack: (stream: string) => boolean;
}

/** Ids per audit call: the script is O(ids) and blocks Redis meanwhile. */
const IDS_PER_AUDIT = 200;

/**
 * The streams whose group was found lost (gone, no longer listing this consumer, or re-created
 * below entries it had fetched) since the loop last rejoined them. Until it rejoins, an entry it
 * held or owed that is in nobody's pending list went with the lost group's pending list: it is
 * kept, and the rejoin (RECOVER_SCRIPT) takes it back, rather than being given up as a peer's.
 */
export interface LostGroups {
  has(stream: string): boolean;
  /** Found lost now: noted, and the loop's lost-group path told. */
  add(stream: string): void;
}

/**
 * Of an audit's findings, one the rejoin is to take back: above the group's last-delivered id
 * (the group was re-created lower: nobody was delivered it since), or in nobody's pending list
 * while the group is lost to this consumer.
 */
export const leftToRejoin = (status: string, groupLost: boolean): boolean => status === 'above' || (status === 'dropped' && groupLost);

/**
 * Last seen here with idle at most `idleMs` at `confirmedAt` (a renewal or an audit sent then):
 * its idle time cannot have reached minIdleMs since, so no peer's XAUTOCLAIM can have taken it.
 */
export function noPeerCouldClaim(d: OwedAuditDeps, confirmedAt: number, idleMs: number): boolean {
  return performance.now() - confirmedAt + idleMs < d.minIdleMs;
}

/** Audits these owed entries of `stream`, IDS_PER_AUDIT at a time; with `claimIdleMs`, claims the due ones into `claimed`. */
export async function auditOwed(
  d: OwedAuditDeps,
  lost: LostGroups,
  stream: string,
  todo: readonly [string, Owed][],
  claimIdleMs: number | undefined,
  claimed: StreamEntry[],
): Promise<void> {
  for (let i = 0; i < todo.length; i += IDS_PER_AUDIT) {
    // Looked at as each audit is sent (earlier ones were awaited): an entry in hand (a reclaim
    // took it back) is the lease's; one settled since is no longer owed, and must not be taken back.
    const held = d.lease.idsOn(stream);
    const chunk = todo.slice(i, i + IDS_PER_AUDIT).filter(([id]) => !held.has(id) && d.marks.owes(stream, id));
    if (chunk.length === 0) continue;
    const sentAt = performance.now();
    const mayTake = d.mayTakeBack(stream);
    const items = chunk.map(([id, o]) => {
      const scheduled = o.retryAt !== undefined;
      // Claiming a scheduled retry that is due: whatever its idle time (the audit checks it is still ours).
      const kind: AuditKind = scheduled ? (claimIdleMs !== undefined ? 'retry' : 'waiting') : 'owed';
      return {
        id,
        kind,
        reown: mayTake && noPeerCouldClaim(d, o.confirmedAt, o.idleMs),
        count: o.count,
        // A scheduled retry's wait is its record's, not its idle time: taken back, it waits here again (idle kept low).
        idleMs: scheduled ? 0 : sentAt - o.confirmedAt + o.idleMs,
      };
    });
    const result = await d.commands.audit(stream, d.consumer, claimIdleMs, items);
    if (result === null) return lost.add(stream);
    applyOwed(d, lost, stream, sentAt, result, claimed);
  }
}

function applyOwed(d: OwedAuditDeps, lost: LostGroups, stream: string, sentAt: number, result: AuditResult, claimed: StreamEntry[]): void {
  const { marks, logger } = d;
  const deleted: string[] = [];
  const retry: StreamEntry[] = [];
  const kept: string[] = [];
  /** Now another consumer's (an XCLAIM by hand, or a peer's claim after a lease lapse), by owner. */
  const others = new Map<string, string[]>();
  const mayTake = d.mayTakeBack(stream);
  const groupLost = !result.known || lost.has(stream);
  let rejoin = !result.known && mayTake;
  for (const f of result.findings) {
    if (f.status === 'mine' || f.status === 'reowned') {
      // Taken back: pending under this consumer again with its count and idle time.
      if (f.status === 'mine') marks.confirm(stream, f.id, sentAt, f.idleMs);
      if (f.status === 'reowned') {
        logger.warn(
          `failed entry ${f.id} of "${stream}" was in nobody's pending list (XGROUP DELCONSUMER of this consumer, a group re-created, or an XACK by hand): taken back for its retry`,
        );
        // Its pending list was dropped: the loop rejoins, whose self-drain retries what was taken back at once.
        rejoin = true;
      }
      continue;
    }
    if (mayTake && leftToRejoin(f.status, groupLost)) {
      // Still owed: the rejoin takes it back (whatever the time, as it does for every entry it owed).
      kept.push(f.id);
      rejoin = true;
      continue;
    }
    marks.forgetOwed(stream, f.id);
    if (f.status === 'other') others.set(f.owner, [...(others.get(f.owner) ?? []), f.id]);
    else if (f.status === 'claimed') retry.push(f.entry);
    else if (f.status === 'deleted') deleted.push(f.id);
    else if (f.status === 'dropped')
      logger.warn(
        mayTake
          ? `failed entry ${f.id} of "${stream}" is no longer pending: a peer may have settled it while this consumer was held up past minIdleMs, so it is not retried here`
          : `failed entry ${f.id} of "${stream}" is no longer pending: the partition's new owner took it over, so it is not retried here`,
      );
  }
  if (deleted.length > 0) d.onDeleted(stream, deleted);
  for (const [owner, ids] of others)
    logger.warn(
      `failed ${ids.length === 1 ? 'entry' : 'entries'} ${someIds(ids)} of "${stream}" ${ids.length === 1 ? 'is' : 'are'} now "${escapeControl(owner)}"'s (an XCLAIM by hand, or a peer's claim after this consumer was held up past minIdleMs): not retried here`,
    );
  if (retry.length > 0) {
    d.lease.hold(retry, sentAt);
    claimed.push(...retry);
  }
  // Once per loss: until the rejoin, later checks find them so again.
  if (kept.length > 0 && !lost.has(stream))
    logger.warn(
      `failed entries ${someIds(kept)} of "${stream}" are in nobody's pending list and the group was lost to this consumer (re-created, or the consumer deleted from it): still owed, taken back when it rejoins the group`,
    );
  if (rejoin) lost.add(stream);
}
