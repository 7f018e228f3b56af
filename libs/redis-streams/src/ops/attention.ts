import { escapeControl as e } from '../escape-control.js';
import { counted, duration } from '../readable.js';
import type { StreamReport } from './stream-reports.js';

/**
 * What in one report needs an operator, from the figures `inspect` already read (no extra call):
 * a consumer's oldest pending entry idle past `minIdleMs` (a live peer would have reclaimed it), a
 * consumer without a connection that owns entries (and, of those shown, entries waiting for their
 * retry), a retry past due by `minIdleMs` under a live consumer, a retry set that could not be
 * read, dead letters, delayed entries past due by minIdleMs (nobody moves them in); with the previous refresh of
 * `--watch`, a dead-letter stream that grew and a lag that rose. Not flagged: entries idle past
 * minIdleMs other than each consumer's oldest (one XPENDING per entry), a lag rising over more than
 * one refresh; a dead-letter key that holds another type. Names are escaped: anyone who may write may name keys, groups and consumers.
 */
export function attention(report: StreamReport, minIdleMs: number, previous?: StreamReport): string[] {
  const found: string[] = [];
  for (const g of report.groups) {
    for (const c of g.consumers) {
      if (c.oldestPendingId !== null && c.oldestPendingIdleMs !== null && c.oldestPendingIdleMs >= minIdleMs)
        found.push(
          `entry ${e(c.oldestPendingId)} held by "${e(c.name)}" in group "${e(g.name)}" idle ${duration(c.oldestPendingIdleMs)}, past minIdleMs ${duration(minIdleMs)}: no live peer reclaimed it`,
        );
      if (c.pending > 0 && c.connected === false)
        found.push(
          `"${e(c.name)}" owns ${counted(c.pending, 'pending entry', 'pending entries')} but has no connection: ${c.pending === 1 ? 'it waits' : 'they wait'} for a peer's reclaim`,
        );
      const retrying = c.pendingEntries.filter((p) => p.retryInMs !== null);
      if (retrying.length > 0 && c.connected === false)
        found.push(
          `"${e(c.name)}" has no connection and ${counted(retrying.length, 'entry shown waits for its retry: a peer adopts it', 'entries shown wait for their retry: a peer adopts them')} once idle past minIdleMs ${duration(minIdleMs)} and tries ${retrying.length === 1 ? 'it' : 'each'} at its due time`,
        );
      for (const p of retrying)
        if (c.connected === true && p.retryInMs! <= -minIdleMs)
          found.push(
            `retry of entry ${e(p.id)} held by "${e(c.name)}" in group "${e(g.name)}" was due ${duration(-p.retryInMs!)} ago and has not begun`,
          );
    }
    if (g.retryStateError !== null) found.push(`retry state of group "${e(g.name)}" unknown (${g.retryStateError})`);
    const lagBefore = previous?.groups.find((p) => p.name === g.name)?.lag;
    if (g.lag !== null && lagBefore !== undefined && lagBefore !== null && g.lag > lagBefore)
      found.push(`lag of group "${e(g.name)}" rose from ${lagBefore} to ${g.lag}`);
  }
  for (const d of report.deadLetters) {
    const before = previous?.deadLetters.find((p) => p.stream === d.stream)?.length;
    if (before !== undefined && d.length > before)
      found.push(`"${e(d.stream)}" grew by ${counted(d.length - before, 'dead letter', 'dead letters')}`);
    if (d.length > 0) found.push(`${counted(d.length, 'dead letter', 'dead letters')} in "${e(d.stream)}"`);
  }
  for (const key of report.deadLetterKeysNotStreams) found.push(`"${e(key)}" is not a stream: nothing can be dead-lettered there`);
  const delayed = report.delayed;
  // Every worker of the stream looks at least every flowCheckMs: past due by minIdleMs, none is running (or none may).
  if ('waiting' in delayed && delayed.nextDueInMs !== null && delayed.nextDueInMs <= -minIdleMs)
    found.push(
      `${counted(delayed.waiting, 'delayed entry waits', 'delayed entries wait')}, the next past due by ${duration(-delayed.nextDueInMs)}: no worker of "${e(report.stream)}" is moving them in (none running, or one without the schedule's rights)`,
    );
  if ('error' in delayed) found.push(`delayed entries of "${e(report.stream)}" unknown (${delayed.error})`);
  if ('orphaned' in delayed && delayed.orphaned)
    found.push(
      `${counted(delayed.orphaned, 'delayed value', 'delayed values')} of "${e(report.stream)}" have no schedule (it was deleted, or ids removed by hand): a worker drops them once the schedule is gone; else HDEL them from its entries hash (docs/guide/flow-control.md)`,
    );
  return found;
}
