import type { RedisConnection } from '../connection/connect.js';
import type { GroupInfo } from '../replies/info-replies.js';
import { parseRangeCount } from '../replies/replies.js';
import { compareIds } from '../stream-ids.js';

/**
 * Up to this many entries after a group's last-delivered id are counted (one XRANGE of at most
 * this many + 1 entries): the lag is exact up to it, whatever the server's `entries-read` says.
 */
export const LAG_COUNT_LIMIT = 100;

/** The highest stream id: nothing can follow it (and `(` of it is no valid XRANGE start). */
const MAX_ID = '18446744073709551615-18446744073709551615';

/** A group's figures as the transport reports them: `lag` is the true one (see {@link groupLag}). */
export interface GroupFigures {
  /** Entries of the stream not yet delivered to the group; null when it cannot be told (see {@link groupLag}). */
  lag: number | null;
  pending: number;
  lastDeliveredId: string;
}

/**
 * The group's lag, true whatever the server's counter says. Redis derives `lag` from
 * `entries-read`, which Redis 7.0 does not replicate with a group's reads: a promoted replica
 * keeps a stale count and reports a lag that never returns to 0. So the entries after the group's
 * last-delivered id are counted, up to LAG_COUNT_LIMIT (`undelivered` is that count, at most
 * LAG_COUNT_LIMIT + 1): up to the limit it is the lag (0 once the group has delivered the stream's
 * last entry). Past it the server's figure is taken when it is above the limit too (it can then be
 * high by the stale part), and the lag is unknown (null) when the server gives none or a lower one.
 */
export function groupLag(reportedLag: number | null, undelivered: number): number | null {
  if (undelivered <= LAG_COUNT_LIMIT) return undelivered;
  return reportedLag !== null && reportedLag > LAG_COUNT_LIMIT ? reportedLag : null;
}

/** Counts the entries after `lastDeliveredId`, up to LAG_COUNT_LIMIT + 1 (one bounded XRANGE). */
export async function countUndelivered(conn: RedisConnection, stream: string, lastDeliveredId: string): Promise<number> {
  if (compareIds(lastDeliveredId, MAX_ID) >= 0) return 0;
  return parseRangeCount(await conn.xrange(stream, `(${lastDeliveredId}`, '+', 'COUNT', LAG_COUNT_LIMIT + 1));
}

/** A group's row with its true lag: the server's row and one bounded count. */
export async function groupFigures(conn: RedisConnection, stream: string, info: GroupInfo): Promise<GroupFigures> {
  const undelivered = await countUndelivered(conn, stream, info.lastDeliveredId);
  return { lag: groupLag(info.reportedLag, undelivered), pending: info.pending, lastDeliveredId: info.lastDeliveredId };
}
