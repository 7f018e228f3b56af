/* The whole page's health first: streams, lag, pending, dead letters and consumers, each with its state. */
import type { OverviewReply } from './api-replies.js';
import { chip, el, type Health } from './dom.js';
import type { Figures } from './figures.js';
import { age, num } from './format.js';
import { groupState, worst } from './group-state.js';

/** One figure of the strip: its label, value, state and the note beside the state's mark. */
export interface Stat {
  label: string;
  value: string;
  state: Health;
  note: string;
}

/** The strip's figures, in words (no DOM: tested alone). */
export function summaryStats(o: Pick<OverviewReply, 'total' | 'streams' | 'attentionItems'>, f: Figures, minIdleMs: number): Stat[] {
  const { groups, dead } = f;
  const oldest = Math.max(0, ...groups.map((g) => g.lagMs ?? 0));
  const consumers = groups.flatMap((g) => g.consumers);
  const gone = consumers.filter((c) => c.connected === false && c.pending > 0).length;
  const unconnected = consumers.filter((c) => c.connected === false).length;
  const unknown = consumers.length > 0 && consumers.every((c) => c.connected === null);
  // Streams with a group behind: "all read" beside a lag read as "nothing waits".
  const behind = o.streams.filter((s) => s.groups.some((g) => (g.lag ?? 0) > 0)).length;
  const lagUnknown = o.streams.some((s) => s.groups.some((g) => g.lag === null));
  const unreadable = o.attentionItems.some((a) => / could not be read /.test(a.text));
  const grew = o.attentionItems.some((a) => / grew by /.test(a.text));
  const scope = o.total > o.streams.length ? ' (this page)' : '';
  const pendingState = worst(groups.map((g) => groupState(g, minIdleMs)));
  const retrying = groups.reduce((n, g) => n + ('waiting' in g.retries ? g.retries.waiting : 0), 0);
  return [
    {
      label: 'Streams',
      value: num(o.total),
      state: unreadable ? 'failing' : 'healthy',
      note: `${unreadable ? 'some unreadable' : behind > 0 ? `${num(behind)} with lag` : lagUnknown ? 'lag unknown' : 'all caught up'}${scope ? ' on this page' : ''}`,
    },
    {
      label: `Lag${scope}`,
      value: num(f.lag),
      state: oldest >= 600_000 ? 'failing' : oldest >= 60_000 ? 'attention' : 'healthy',
      note: oldest ? `oldest ${age(oldest)}` : 'none waits',
    },
    {
      label: `Pending${scope}`,
      value: num(f.pending),
      state: pendingState,
      note:
        pendingState === 'failing' ? 'held by gone consumers' : pendingState === 'attention' ? 'waiting long' : `${num(retrying)} retrying`,
    },
    {
      label: `Dead letters${scope}`,
      value: num(dead),
      state: grew ? 'failing' : dead > 0 ? 'attention' : 'healthy',
      note: grew ? 'growing' : dead > 0 ? 'to look at' : 'none',
    },
    {
      label: `Consumers${scope}`,
      value: num(consumers.length),
      state: gone > 0 ? 'failing' : unconnected > 0 ? 'attention' : 'healthy',
      note:
        gone > 0
          ? `${num(gone)} gone with work`
          : unconnected > 0
            ? `${num(unconnected)} not connected`
            : unknown
              ? 'connections unknown'
              : 'all connected',
    },
  ];
}

export function summaryStrip(o: OverviewReply, f: Figures, minIdleMs: number): HTMLElement {
  return el(
    'div',
    { class: 'strip', role: 'region', 'aria-label': 'Summary' },
    ...summaryStats(o, f, minIdleMs).map((s) =>
      el(
        'div',
        { class: `stat ${s.state}`, role: 'group', 'aria-label': s.label },
        el('div', { class: 'label' }, s.label),
        el('div', { class: 'value', 'data-stat': s.label }, s.value),
        chip(s.state, s.note),
      ),
    ),
  );
}
