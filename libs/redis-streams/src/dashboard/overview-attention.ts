import { attentionFindings, type Finding } from '../ops/attention.js';
import { escapeControl } from '../escape-control.js';
import type { StreamReport } from '../ops/stream-reports.js';
import type { StreamSummary } from '../redis/tools/dashboard-replies.js';
import { counted, duration } from '../readable.js';
import { MAX_PARTITIONS } from '../partitions.js';

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

/** An attention finding of the dashboard's: ops/attention.ts' kinds, the retry set's figures, and a dead-letter key it may not read. */
export type StreamFinding = Omit<Finding, 'kind'> & { kind: Finding['kind'] | 'retry-waiting' | 'retry-due' | 'refused' };

/** What needs an operator in this stream (ops/attention.ts), and the retry set's figures. */
export function streamAttention(report: StreamReport, minIdleMs: number, previous?: StreamReport): StreamFinding[] {
  const found: StreamFinding[] = attentionFindings(report, minIdleMs, previous);
  for (const g of report.groups) {
    if (g.retryWaiting)
      found.push({
        text: `${counted(g.retryWaiting, 'entry', 'entries')} of group "${escapeControl(g.name)}" ${g.retryWaiting === 1 ? 'waits' : 'wait'} for a retry`,
        kind: 'retry-waiting',
        group: g.name,
        count: g.retryWaiting,
      });
    if (g.retryDue)
      found.push({
        text: `${counted(g.retryDue, 'retry', 'retries')} of group "${escapeControl(g.name)}" ${g.retryDue === 1 ? 'is' : 'are'} due and not yet taken`,
        kind: 'retry-due',
        group: g.name,
        count: g.retryDue,
      });
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

/** A partition's key (partitions.ts: `<prefix>{<pattern>:<index>}`): its pattern's label and its index; null for any other key. */
function partitionOfKey(stream: string): { label: string; index: number } | null {
  const m = /^(.*)\{(.*):(\d+)\}$/s.exec(stream);
  return m ? { label: `${m[1]}{${m[2]}:*}`, index: Number(m[3]) } : null;
}

/** Indexes as ranges: `0–3`, `0, 2, 5–7`. */
function ranges(indexes: number[]): string {
  const sorted = [...new Set(indexes)].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(j > i ? `${sorted[i]}–${sorted[j]}` : `${sorted[i]}`);
    i = j + 1;
  }
  return out.join(', ');
}

/** One stream's findings, as the overview has them. */
export interface StreamFindings {
  stream: string;
  findings: StreamFinding[];
  deadLetters: readonly DeadLetterFigure[];
}

/**
 * The overview's attention lines: a stream's own, except that the partitions of one pattern (two or more
 * with something to say) share one line per finding and what it names (a consumer of a group, a group, the
 * dead letters): one dead worker on 4 partitions is one line, not one per partition and per finding. A dead
 * consumer's oldest idle entry goes into its line (it is why nobody reclaimed them).
 */
export function groupedAttention(streams: readonly StreamFindings[], minIdleMs: number): AttentionItem[] {
  const patterns = new Map<string, { index: number; s: StreamFindings }[]>();
  // A key shaped `x{p:N}` is a partition only when the page has its pattern's partitions from 0 on, without a gap
  // (a pattern's groups are made on every partition): `x{tenant:1}` and `x{tenant:22}` are two users' streams.
  const indexes = new Map<string, Set<number>>();
  for (const s of streams) {
    const p = partitionOfKey(s.stream);
    if (p) indexes.set(p.label, (indexes.get(p.label) ?? new Set()).add(p.index));
  }
  const partitioned = (label: string) => {
    const seen = indexes.get(label)!;
    return seen.size <= MAX_PARTITIONS && [...seen].every((i) => i < seen.size);
  };
  for (const s of streams) {
    const p = partitionOfKey(s.stream);
    if (p && s.findings.length > 0 && partitioned(p.label))
      patterns.set(p.label, [...(patterns.get(p.label) ?? []), { index: p.index, s }]);
  }
  const items: AttentionItem[] = [];
  const done = new Set<string>();
  for (const s of streams) {
    const p = partitionOfKey(s.stream);
    const parts = p ? patterns.get(p.label) : undefined;
    if (!p || !parts || parts.length < 2) {
      for (const f of s.findings) items.push({ text: `${s.stream}: ${f.text}`, ...attentionTarget(s.stream, f.text, s.deadLetters) });
      continue;
    }
    if (done.has(p.label)) continue;
    done.add(p.label);
    items.push(...patternLines(p.label, parts, minIdleMs));
  }
  return items;
}

/** One line per kind and subject over a pattern's partitions. */
function patternLines(label: string, parts: { index: number; s: StreamFindings }[], minIdleMs: number): AttentionItem[] {
  const e = escapeControl;
  const subjectOf = (f: StreamFinding) =>
    f.kind === 'dead' || f.kind === 'dead-grew' || f.kind === 'refused' || f.kind === 'not-stream' || f.kind.startsWith('delayed')
      ? f.kind
      : JSON.stringify([f.kind, f.group ?? null, f.consumer ?? null]);
  // A consumer without a connection that owns entries: its idle oldest entries are said in its line.
  const gone = new Set<string>();
  for (const { s } of parts) for (const f of s.findings) if (f.kind === 'gone') gone.add(JSON.stringify([f.group, f.consumer]));
  const bySubject = new Map<string, { index: number; s: StreamFindings; f: StreamFinding }[]>();
  for (const { index, s } of parts)
    for (const f of s.findings) {
      if (f.kind === 'idle' && gone.has(JSON.stringify([f.group, f.consumer]))) continue;
      const key = subjectOf(f);
      bySubject.set(key, [...(bySubject.get(key) ?? []), { index, s, f }]);
    }
  return [...bySubject.values()].map((all) => {
    const first = all[0]!;
    const where = `${label} (partition${all.length > 1 || parts.length > 1 ? 's' : ''} ${ranges(all.map((a) => a.index))})`;
    const sum = all.reduce((n, a) => n + (a.f.count ?? 0), 0);
    const group = first.f.group === undefined ? '' : ` in group "${e(first.f.group)}"`;
    const consumer = first.f.consumer === undefined ? '' : `"${e(first.f.consumer)}"`;
    let text: string;
    switch (first.f.kind) {
      case 'gone': {
        const idle = parts.flatMap(({ s }) =>
          s.findings.filter((f) => f.kind === 'idle' && f.group === first.f.group && f.consumer === first.f.consumer),
        );
        const longest = Math.max(0, ...idle.map((f) => f.idleMs ?? 0));
        text = `${consumer} owns ${counted(sum, 'pending entry', 'pending entries')}${group} but has no connection: ${sum === 1 ? 'it waits' : 'they wait'} for a peer's reclaim${idle.length ? `; the oldest idle ${duration(longest)}, past minIdleMs ${duration(minIdleMs)}` : ''}`;
        break;
      }
      case 'idle':
        text = `the oldest entries held by ${consumer}${group} idle up to ${duration(Math.max(...all.map((a) => a.f.idleMs ?? 0)))}, past minIdleMs ${duration(minIdleMs)}: no live peer reclaimed them`;
        break;
      case 'dead':
        text = `${counted(sum, 'dead letter', 'dead letters')} in its partitions' dead-letter streams`;
        break;
      case 'dead-grew':
        text = `its partitions' dead-letter streams grew by ${counted(sum, 'dead letter', 'dead letters')}`;
        break;
      case 'retry-waiting':
        text = `${counted(sum, 'entry', 'entries')} of group "${e(first.f.group!)}" ${sum === 1 ? 'waits' : 'wait'} for a retry`;
        break;
      case 'retry-due':
        text = `${counted(sum, 'retry', 'retries')} of group "${e(first.f.group!)}" ${sum === 1 ? 'is' : 'are'} due and not yet taken`;
        break;
      case 'lag-rose':
        text = `lag of group "${e(first.f.group!)}" rose (now ${sum} in these partitions)`;
        break;
      default:
        // Any other: the first partition's words, and where else it holds.
        text = `${first.f.text}${all.length > 1 ? ` (and ${all.length - 1} more like it)` : ''}`;
    }
    const target = attentionTarget(first.s.stream, first.f.text, first.s.deadLetters);
    // A line naming a group opens that group's section of the first partition it names.
    const grouped = target.page === 'stream' && first.f.group !== undefined && !/\\/.test(first.f.group) ? { group: first.f.group } : {};
    return { text: `${where}: ${text}`, ...target, ...grouped };
  });
}
