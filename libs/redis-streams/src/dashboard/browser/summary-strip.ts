/* The whole page's health first: streams, lag, pending, dead letters and consumers, each with its state. */
import type { OverviewReply } from './api-replies.js';
import { chip, el, type Health } from './dom.js';
import type { Figures } from './figures.js';
import { age, num } from './format.js';
import { groupState, worst } from './group-state.js';

export function summaryStrip(o: OverviewReply, f: Figures, minIdleMs: number): HTMLElement {
  const { groups, dead } = f;
  const oldest = Math.max(0, ...groups.map((g) => g.lagMs ?? 0));
  const consumers = groups.flatMap((g) => g.consumers);
  const gone = consumers.filter((c) => c.connected === false && c.pending > 0).length;
  const unreadable = o.attentionItems.some((a) => / could not be read /.test(a.text));
  const grew = o.attentionItems.some((a) => / grew by /.test(a.text));
  const stat = (label: string, value: string, state: Health, note: string) =>
    el(
      'div',
      { class: `stat ${state}`, role: 'group', 'aria-label': label },
      el('div', { class: 'label' }, label),
      el('div', { class: 'value', 'data-stat': label }, value),
      chip(state, note),
    );
  const scope = o.total > o.streams.length ? ' (this page)' : '';
  const pendingState = worst(groups.map((g) => groupState(g, minIdleMs)));
  const retrying = groups.reduce((n, g) => n + ('waiting' in g.retries ? g.retries.waiting : 0), 0);
  return el(
    'div',
    { class: 'strip', role: 'region', 'aria-label': 'Summary' },
    stat('Streams', num(o.total), unreadable ? 'failing' : 'healthy', unreadable ? 'unreadable' : scope ? 'this page read' : 'all read'),
    stat(
      `Lag${scope}`,
      num(f.lag),
      oldest >= 600_000 ? 'failing' : oldest >= 60_000 ? 'attention' : 'healthy',
      oldest ? `oldest ${age(oldest)}` : 'none waits',
    ),
    stat(
      `Pending${scope}`,
      num(f.pending),
      pendingState,
      pendingState === 'failing' ? 'held by gone consumers' : pendingState === 'attention' ? 'waiting long' : `${num(retrying)} retrying`,
    ),
    stat(
      `Dead letters${scope}`,
      num(dead),
      grew ? 'failing' : dead > 0 ? 'attention' : 'healthy',
      grew ? 'growing' : dead > 0 ? 'to look at' : 'none',
    ),
    stat(`Consumers${scope}`, num(consumers.length), gone > 0 ? 'failing' : 'healthy', gone > 0 ? `${gone} gone with work` : 'connected'),
  );
}
