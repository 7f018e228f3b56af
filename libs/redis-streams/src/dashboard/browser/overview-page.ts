/* The overview (#/): the summary, what needs attention, this app's consumer, the charts, and a page of streams. */
import type { AttentionItem, StreamRow } from './api-replies.js';
import { get } from './api.js';
import { chartsSection } from './charts-section.js';
import { consumerPanel } from './consumer-panel.js';
import { button, card, chip, el, hash, link, table, type Child } from './dom.js';
import { figures } from './figures.js';
import { age, count, num, rate } from './format.js';
import { groupState } from './group-state.js';
import { rerender } from './rerender.js';
import { state } from './state.js';
import { summaryStrip } from './summary-strip.js';

function streamRows(s: StreamRow, cluster: boolean, minIdleMs: number): Child[][] {
  const dead = s.deadLetters.find((d) => (d.length ?? 0) > 0);
  const groups = s.groups.length ? s.groups : [null];
  return groups.map((g, i) => {
    const first = i === 0;
    return [
      first ? el('span', { class: 'name' }, link(s.stream, hash('stream', s.stream), `s:${s.stream}`)) : '',
      first ? num(s.length) : '',
      first ? rate(s.producedPerSec) : '',
      g ? link(g.name, `${hash('stream', s.stream, g.name)}`) : '–',
      g ? num(g.lag) : '–',
      g ? age(g.lagMs) : '–',
      g ? num(g.pending) : '–',
      g ? num(g.consumerCount) : '–',
      g ? rate(g.consumedPerSec) : '–',
      first ? (dead ? link(num(dead.length), hash('dead', dead.stream)) : '0') : '',
      g ? chip(groupState(g, minIdleMs)) : '',
      ...(cluster ? [first ? el('span', { class: 'mono' }, s.node) : ''] : []),
    ];
  });
}

/** An attention line as a link to the page it names. */
function attentionLink(a: AttentionItem): Child {
  const to =
    a.page === 'dead'
      ? hash('dead', a.key)
      : a.page === 'entry'
        ? hash('entry', a.key, a.id ?? '')
        : a.group !== undefined
          ? hash('stream', a.key, a.group)
          : hash('stream', a.key);
  return el('li', {}, link(a.text, to));
}

export async function overviewPage(): Promise<Child[]> {
  const o = await get('overview', `?page=${state.page}`);
  const { minIdleMs } = state;
  const pages = Math.max(1, Math.ceil(o.total / o.pageSize));
  const turn = (to: number) => () => {
    state.page = to;
    rerender();
  };
  // On a cluster: which master serves each stream (a partitioned stream's partitions spread over them).
  const cluster = o.streams.some((s) => s.node !== null);
  const head = [
    'Stream',
    'Length',
    'Produced/s',
    'Group',
    'Lag',
    'Lag age',
    'Pending',
    'Consumers',
    'Consumed/s',
    'Dead letters',
    'State',
    ...(cluster ? ['Master'] : []),
  ];
  const f = figures(o.streams);
  return [
    el('h1', {}, 'Overview'),
    el('p', { class: 'muted small' }, `Server: ${o.server}`),
    summaryStrip(o, f, minIdleMs),
    o.attentionItems.length
      ? card('Needs attention', el('ul', { class: 'attention-list' }, ...o.attentionItems.map(attentionLink)))
      : el('p', { class: 'notice ok', role: 'status' }, '● Nothing needs attention.'),
    ...(await consumerPanel()),
    chartsSection(`overview:${state.page}`, f, o.history),
    card(
      'Streams',
      table(
        head,
        o.streams.flatMap((s) => streamRows(s, cluster, minIdleMs)),
        [1, 2, 4, 5, 6, 7, 8, 9],
        'Streams',
        `No stream with a consumer group matches. Create one (XGROUP CREATE <stream> <group> $ MKSTREAM) or start a worker.`,
      ),
      el('p', { class: 'small muted' }, `${count(o.total, 'stream', 'streams')}, page ${o.page + 1} of ${pages}`),
      o.page > 0 ? button('Previous page', 'prev:overview', turn(o.page - 1)) : null,
      o.page + 1 < pages ? button('Next page', 'next:overview', turn(o.page + 1)) : null,
    ),
  ];
}
