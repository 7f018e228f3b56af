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
  return attentionFindings(report, minIdleMs, previous).map((f) => f.text);
}

/**
 * One attention line and what it is about, for those who group lines (the dashboard, per partitioned
 * pattern): its kind, and the group, consumer and key it names, with the figures its words hold.
 */
export interface Finding {
  text: string;
  kind:
    | 'idle'
    | 'gone'
    | 'gone-retrying'
    | 'retry-late'
    | 'retry-state'
    | 'lag-rose'
    | 'dead-grew'
    | 'dead'
    | 'not-stream'
    | 'delayed-late'
    | 'delayed-unknown'
    | 'delayed-orphaned';
  group?: string;
  consumer?: string;
  /** The dead-letter key (dead, dead-grew, not-stream). */
  key?: string;
  /** Entries it counts (gone, gone-retrying, dead, dead-grew, delayed-*), or the lag it rose to (lag-rose). */
  count?: number;
  /** The idle time it names (idle). */
  idleMs?: number;
}

/** attention(), each line with what it is about. */
export function attentionFindings(report: StreamReport, minIdleMs: number, previous?: StreamReport): Finding[] {
  const found: Finding[] = [];
  const push = (text: string, about: Omit<Finding, 'text'>) => found.push({ text, ...about });
  for (const g of report.groups) {
    for (const c of g.consumers) {
      if (c.oldestPendingId !== null && c.oldestPendingIdleMs !== null && c.oldestPendingIdleMs >= minIdleMs)
        push(
          `entry ${e(c.oldestPendingId)} held by "${e(c.name)}" in group "${e(g.name)}" idle ${duration(c.oldestPendingIdleMs)}, past minIdleMs ${duration(minIdleMs)}: no live peer reclaimed it`,
          { kind: 'idle', group: g.name, consumer: c.name, idleMs: c.oldestPendingIdleMs },
        );
      if (c.pending > 0 && c.connected === false)
        push(
          `"${e(c.name)}" owns ${counted(c.pending, 'pending entry', 'pending entries')} but has no connection: ${c.pending === 1 ? 'it waits' : 'they wait'} for a peer's reclaim`,
          { kind: 'gone', group: g.name, consumer: c.name, count: c.pending },
        );
      const retrying = c.pendingEntries.filter((p) => p.retryInMs !== null);
      if (retrying.length > 0 && c.connected === false)
        push(
          `"${e(c.name)}" has no connection and ${counted(retrying.length, 'entry shown waits for its retry: a peer adopts it', 'entries shown wait for their retry: a peer adopts them')} once idle past minIdleMs ${duration(minIdleMs)} and tries ${retrying.length === 1 ? 'it' : 'each'} at its due time`,
          { kind: 'gone-retrying', group: g.name, consumer: c.name, count: retrying.length },
        );
      for (const p of retrying)
        if (c.connected === true && p.retryInMs! <= -minIdleMs)
          push(
            `retry of entry ${e(p.id)} held by "${e(c.name)}" in group "${e(g.name)}" was due ${duration(-p.retryInMs!)} ago and has not begun`,
            { kind: 'retry-late', group: g.name, consumer: c.name },
          );
    }
    if (g.retryStateError !== null)
      push(`retry state of group "${e(g.name)}" unknown (${g.retryStateError})`, { kind: 'retry-state', group: g.name });
    const lagBefore = previous?.groups.find((p) => p.name === g.name)?.lag;
    if (g.lag !== null && lagBefore !== undefined && lagBefore !== null && g.lag > lagBefore)
      push(`lag of group "${e(g.name)}" rose from ${lagBefore} to ${g.lag}`, { kind: 'lag-rose', group: g.name, count: g.lag });
  }
  for (const d of report.deadLetters) {
    const before = previous?.deadLetters.find((p) => p.stream === d.stream)?.length;
    if (before !== undefined && d.length > before)
      push(`"${e(d.stream)}" grew by ${counted(d.length - before, 'dead letter', 'dead letters')}`, {
        kind: 'dead-grew',
        key: d.stream,
        count: d.length - before,
      });
    if (d.length > 0)
      push(`${counted(d.length, 'dead letter', 'dead letters')} in "${e(d.stream)}"`, { kind: 'dead', key: d.stream, count: d.length });
  }
  for (const key of report.deadLetterKeysNotStreams)
    push(`"${e(key)}" is not a stream: nothing can be dead-lettered there`, { kind: 'not-stream', key });
  const delayed = report.delayed;
  // Every worker of the stream looks at least every flowCheckMs: past due by minIdleMs, none is running (or none may).
  if ('waiting' in delayed && delayed.nextDueInMs !== null && delayed.nextDueInMs <= -minIdleMs)
    push(
      `${counted(delayed.waiting, 'delayed entry waits', 'delayed entries wait')}, the next past due by ${duration(-delayed.nextDueInMs)}: no worker of "${e(report.stream)}" is moving them in (none running, or one without the schedule's rights)`,
      { kind: 'delayed-late', count: delayed.waiting },
    );
  if ('error' in delayed) push(`delayed entries of "${e(report.stream)}" unknown (${delayed.error})`, { kind: 'delayed-unknown' });
  if ('orphaned' in delayed && delayed.orphaned)
    push(
      `${counted(delayed.orphaned, 'delayed value', 'delayed values')} of "${e(report.stream)}" have no schedule (it was deleted, or ids removed by hand): a worker drops them once the schedule is gone; else HDEL them from its entries hash (docs/guide/flow-control.md)`,
      { kind: 'delayed-orphaned', count: delayed.orphaned },
    );
  return found;
}
