import { attention } from '../ops/attention.js';
import { escapeControl } from '../escape-control.js';
import type { StreamReport } from '../ops/stream-reports.js';
import type { StreamSummary } from '../redis/tools/dashboard-replies.js';
import { counted } from '../readable.js';

export interface DeadLetterFigure {
  stream: string;
  /** null: the key holds another type (nothing can be dead-lettered there). */
  length: number | null;
}

/** A summary in the shape `inspect` reports (the same attention rules apply to both): no retry state, each consumer's oldest pending entry. */
export function asReport(
  s: StreamSummary,
  connected: Map<string, Set<string>> | null,
  dead: DeadLetterFigure[],
  retries: Map<string, { waiting: number; due: number } | { error: string }>,
  delayed: StreamReport['delayed'],
): StreamReport {
  return {
    stream: s.stream,
    length: s.length,
    lastGeneratedId: s.lastGeneratedId,
    entriesAdded: s.entriesAdded,
    idempotency: s.idempotency,
    groups: s.groups.map((g) => ({
      name: g.name,
      pending: g.pending,
      lastDeliveredId: g.lastDeliveredId,
      lag: g.lag,
      entriesRead: g.entriesRead,
      consumers: g.consumers.map((c) => ({
        ...c,
        connected: connected === null ? null : (connected.get(g.name)?.has(c.name) ?? false),
        oldestPendingAgeMs: null,
        pendingEntries: [],
        pendingStates: {},
      })),
      ...retryFigures(retries.get(g.name)),
      // The overview's one script reads no ownership keys; the stream page does (inspectStreams).
      ordering: null,
      paused: null,
    })),
    deadLetters: dead.filter((d) => d.length !== null).map((d) => ({ stream: d.stream, length: d.length! })),
    deadLetterKeysNotStreams: dead.filter((d) => d.length === null).map((d) => d.stream),
    delayed,
  };
}

/** What needs an operator in this stream (ops/attention.ts), and the retry set's figures. */
export function streamAttention(report: StreamReport, minIdleMs: number, previous?: StreamReport): string[] {
  const found = attention(report, minIdleMs, previous);
  for (const g of report.groups) {
    if (g.retryWaiting)
      found.push(
        `${counted(g.retryWaiting, 'entry', 'entries')} of group "${escapeControl(g.name)}" ${g.retryWaiting === 1 ? 'waits' : 'wait'} for a retry`,
      );
    if (g.retryDue)
      found.push(
        `${counted(g.retryDue, 'retry', 'retries')} of group "${escapeControl(g.name)}" ${g.retryDue === 1 ? 'is' : 'are'} due and not yet taken`,
      );
  }
  return found;
}

function retryFigures(r: { waiting: number; due: number } | { error: string } | undefined) {
  if (r === undefined) return { retryWaiting: null, retryDue: null, retryStateError: null };
  return 'error' in r
    ? { retryWaiting: null, retryDue: null, retryStateError: r.error }
    : { retryWaiting: r.waiting, retryDue: r.due, retryStateError: null };
}

/** Where an attention line points: the page that shows what it names (its stream, its dead letters, its entry). */
export interface AttentionItem {
  text: string;
  /** `stream`: the stream page (`key` the stream; `group` when the line names one); `dead`: the dead-letter page; `entry`: an entry of `key`. */
  page: 'stream' | 'dead' | 'entry';
  key: string;
  group?: string;
  id?: string;
}

/** The page an attention line of `stream` names: read off the line's own words (ops/attention.ts' wording). */
export function attentionTarget(stream: string, line: string, dead: readonly DeadLetterFigure[]): Omit<AttentionItem, 'text'> {
  const letters = dead.find((d) => d.length !== null && line.includes(`"${escapeControl(d.stream)}"`) && /dead letter/.test(line));
  if (letters) return { page: 'dead', key: letters.stream };
  const entry = /^(?:retry of )?entry (\d+-\d+) held by /.exec(line);
  if (entry) return { page: 'entry', key: stream, id: entry[1]! };
  const group = /in group "([^"]*)"|of group "([^"]*)"/.exec(line);
  const name = group?.[1] ?? group?.[2];
  return name !== undefined && !/\\/.test(name) ? { page: 'stream', key: stream, group: name } : { page: 'stream', key: stream };
}
