import { escapeControl as e } from '../escape-control.js';
import type { PendingEntryReport } from '../ops/pending-states.js';
import type { ConsumerReport, GroupReport, StreamReport } from '../ops/stream-reports.js';
import { counted, duration } from '../readable.js';

/** Entries per second produced (per stream) and consumed (per stream, then group) between two reports. */
export interface Rates {
  produced: Map<string, number>;
  consumed: Map<string, Map<string, number>>;
}

export function rates(before: StreamReport[], after: StreamReport[], seconds: number): Rates {
  const produced = new Map<string, number>();
  const consumed = new Map<string, Map<string, number>>();
  for (const now of after) {
    const then = before.find((r) => r.stream === now.stream);
    if (!then) continue;
    produced.set(now.stream, Math.max(0, now.entriesAdded - then.entriesAdded) / seconds);
    for (const g of now.groups) {
      const was = then.groups.find((x) => x.name === g.name);
      if (was?.entriesRead !== null && was?.entriesRead !== undefined && g.entriesRead !== null) {
        if (!consumed.has(now.stream)) consumed.set(now.stream, new Map());
        consumed.get(now.stream)!.set(g.name, Math.max(0, g.entriesRead - was.entriesRead) / seconds);
      }
    }
  }
  return { produced, consumed };
}

const age = (ms: number | null): string => (ms === null ? '-' : duration(ms));

/** The reports as text, one block per stream; with rates when watching. `group`: the one group asked for. Names are escaped: anyone who may write may name keys, groups and consumers. */
export function renderReports(reports: StreamReport[], r?: Rates, group?: string): string {
  const lines: string[] = [];
  for (const s of reports) {
    const producing = r?.produced.get(s.stream);
    lines.push(
      `${e(s.stream)}  length ${s.length}  last id ${e(s.lastGeneratedId)}${producing === undefined ? '' : `  produced ${producing.toFixed(1)}/s`}`,
    );
    const idmp = idempotencyLine(s);
    if (idmp) lines.push(idmp);
    for (const d of s.deadLetters) lines.push(`  dead letters: ${e(d.stream)} ${d.length}`);
    const delayed = delayedLine(s.delayed);
    if (delayed) lines.push(delayed);
    for (const a of s.attention ?? []) lines.push(`  attention: ${a}`);
    if (s.groups.length === 0) lines.push(group === undefined ? '  no consumer group' : `  no group "${e(group)}"`);
    for (const g of s.groups) {
      const consuming = r?.consumed.get(s.stream)?.get(g.name);
      lines.push(
        `  group ${e(g.name)}  lag ${g.lag ?? 'unknown'}  pending ${g.pending}  last delivered ${e(g.lastDeliveredId)}  consumers ${g.consumers.length}${consuming === undefined ? '' : `  consumed ${consuming.toFixed(1)}/s`}${retryFigures(g)}`,
      );
      if (g.ordering) lines.push(`    ${orderingLine(g.ordering)}`);
      if (g.paused) lines.push(`    ${pausedLine(g.paused)}`);
      for (const c of g.consumers) {
        lines.push(
          `    ${e(c.name)}  pending ${c.pending}  ${idleFigures(c)}  oldest pending ${age(c.oldestPendingAgeMs)}${connection(c)}`,
        );
        for (const p of c.pendingEntries)
          lines.push(`      ${e(p.id)}  delivery ${p.deliveries}  idle ${age(p.idleMs)}  ${waitsFor(p, c, g)}`);
      }
    }
  }
  return lines.join('\n');
}

/** An ordered stream's owner: who reads it now (its epoch, the fencing token), and how many members share the partitions. */
function orderingLine(o: NonNullable<GroupReport['ordering']>): string {
  const members = counted(o.members, 'member', 'members');
  if (o.consumer === null) return `ordered: no owner now (${members}; the next beat of the member it falls to takes it)`;
  return `ordered: owned by ${e(o.consumer)} (epoch ${o.epoch}, lease ${age(o.leaseMs)} left; ${members} ${o.members === 1 ? 'shares' : 'share'} the partitions)${durabilityText(o.durability)}`;
}

/** What an ordered partition's owner says of its durable acks: nothing without them. */
function durabilityText(d: NonNullable<GroupReport['ordering']>['durability']): string {
  if (!d) return '';
  const wanted = `${counted(d.replicas, 'replica', 'replicas')}${d.fsync ? ', fsynced' : ''}`;
  const since = `since ${new Date(d.since).toISOString()} (${duration(Math.max(0, Date.now() - d.since))} ago)`;
  const got = d.refused
    ? `the wait refused: ${e(d.refused)}`
    : `${d.confirmed ?? 0} of ${counted(d.replicas, 'replica', 'replicas')} confirmed`;
  switch (d.state) {
    case 'confirmed':
      return `; durable acks on ${wanted}: confirmed`;
    case 'pending':
      return `; durable acks on ${wanted}: not confirmed yet`;
    case 'held':
      return `; durable acks: HELD ${since}: ${got}, nothing starts until the replicas confirm`;
    case 'degraded':
      return `; durable acks: DEGRADED ${since}: ${got}, carrying on without waiting`;
  }
}

/** Delayed entries waiting in the stream's schedule: said when some wait, or when the schedule could not be read. */
export function delayedLine(d: StreamReport['delayed']): string | undefined {
  if ('error' in d) return `  delayed: unknown (${d.error})`;
  const orphaned = d.orphaned ? `, ${d.orphaned} values without a schedule` : '';
  if (d.waiting === 0 || d.nextDueInMs === null) return orphaned ? `  delayed: 0 waiting${orphaned}` : undefined;
  const next = d.nextDueInMs >= 0 ? `next due in ${duration(d.nextDueInMs)}` : `next past due by ${duration(-d.nextDueInMs)}`;
  return `  delayed: ${d.waiting} waiting, ${next}${orphaned}`;
}

/** A paused pattern: since when, by whom (as the flag says), and what it means. */
export function pausedLine(p: NonNullable<GroupReport['paused']>): string {
  const since = p.at === null ? '' : ` since ${new Date(p.at).toISOString()}`;
  return `paused${since}${p.by ? ` by ${e(p.by)}` : ''}: nothing new is read (redis-streams resume to undo)`;
}

/** Idempotent produce's counters and window (Redis 8.6), on streams that had an idempotent write. */
function idempotencyLine({ idempotency: i }: StreamReport): string | undefined {
  if (!i || (i.iidsAdded === 0 && i.pidsTracked === 0)) return undefined;
  const tracked = `${counted(i.iidsTracked, 'key', 'keys')} of ${counted(i.pidsTracked, 'producer', 'producers')}`;
  return `  idempotent writes: ${i.iidsAdded} added, ${counted(i.iidsDuplicates, 'duplicate', 'duplicates')}  window ${i.windowSec} s, ${i.maxKeys} keys per producer  tracked ${tracked}`;
}

/** Which figure `idle` is depends on the server: said, so a live parked worker on Redis 7.0 is not read as stuck. */
function idleFigures(c: ConsumerReport): string {
  if (c.inactiveMs === null) return `idle ${age(c.idleMs)} since its last delivery`;
  return `idle ${age(c.idleMs)} since its last read, ${c.inactiveMs < 0 ? 'never delivered to' : `${age(c.inactiveMs)} since its last delivery`}`;
}

const connection = (c: ConsumerReport): string => (c.connected === null ? '' : c.connected ? '  connected' : '  no connection');

/** The retry set's figures on the group line: said only when there are records, or when it could not be read. */
function retryFigures(g: GroupReport): string {
  if (g.retryStateError !== null) return `  retry state unknown (${g.retryStateError})`;
  return g.retryWaiting || g.retryDue ? `  retries waiting ${g.retryWaiting}, due ${g.retryDue}` : '';
}

const GONE = "consumer gone: a peer's reclaim takes it once idle past minIdleMs";

/** What one shown pending entry waits for, in words (see PendingState). */
function waitsFor(p: PendingEntryReport, c: ConsumerReport, g: GroupReport): string {
  const gone = c.connected === false ? `; ${GONE}` : '';
  switch (p.state) {
    case 'retry-waiting':
      return `waiting for its retry in ${age(p.retryInMs)} (due ${new Date(p.retryDueAt!).toISOString()})${gone && `${gone}, and tries it when due`}`;
    case 'retry-due':
      return `retry due ${age(-p.retryInMs!)} ago${gone && `${gone}, and tries it then`}`;
    case 'live':
      return 'in a live handler';
    case 'consumer-gone':
      return GONE;
    default:
      return g.retryStateError !== null ? 'retry state unknown' : 'connection unknown (no +client|list)';
  }
}
