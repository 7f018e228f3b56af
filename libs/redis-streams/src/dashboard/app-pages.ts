/* The dashboard's browser code, part 2 of 4: the pages (overview, stream, entry, dead letters).
 * Sent as source with the other parts (app-script.ts); reaches them through `ui` only. */
import type { AppState, Child, Dom } from './app-dom.js';
import type { Panels } from './app-panels.js';

/** Made by the served script (app-script.ts), not by this module. */
declare const ui: Dom & Panels & { state: AppState };

function streamRows(s: any, cluster: boolean): Child[][] {
  const dead = s.deadLetters.find((d: any) => d.length > 0);
  const groups = s.groups.length ? s.groups : [null];
  return groups.map((g: any, i: number) => {
    const first = i === 0;
    return [
      first ? ui.el('span', { class: 'name' }, ui.link(s.stream, `#/stream/${encodeURIComponent(s.stream)}`, `s:${s.stream}`)) : '',
      first ? ui.num(s.length) : '',
      first ? ui.rate(s.producedPerSec) : '',
      first ? ui.spark(s.producedHistory, 'produced') : '',
      g ? g.name : '–',
      g ? ui.num(g.lag) : '–',
      g ? ui.age(g.lagMs) : '–',
      g ? ui.num(g.pending) : '–',
      g ? ui.num(g.consumerCount) : '–',
      g ? ui.el('span', {}, ui.rate(g.consumedPerSec), ' ', ui.spark(g.consumedHistory, 'consumed')) : '–',
      first ? (dead ? ui.link(ui.num(dead.length), `#/dead/${encodeURIComponent(dead.stream)}`) : '0') : '',
      ...(cluster ? [first ? s.node : ''] : []),
    ];
  });
}

async function overviewPage(): Promise<Child[]> {
  const o = await ui.get(`api/overview?page=${ui.state.page}`);
  const pages = Math.max(1, Math.ceil(o.total / o.pageSize));
  const turn = (to: number) => () => {
    ui.state.page = to;
    ui.rerender();
  };
  // On a cluster: which master serves each stream (a partitioned stream's partitions spread over them).
  const cluster = o.streams.some((s: any) => s.node !== null);
  const head = [
    'Stream',
    'Length',
    'Produced/s',
    'Trend',
    'Group',
    'Lag',
    'Lag age',
    'Pending',
    'Consumers',
    'Consumed/s',
    'Dead letters',
    ...(cluster ? ['Master'] : []),
  ];
  return [
    ui.el('h1', {}, 'Overview'),
    ui.el('p', { class: 'muted' }, `Server: ${o.server}`),
    ...(await ui.consumerPanel()),
    o.attention.length
      ? ui.el(
          'section',
          { 'aria-label': 'Needs attention' },
          ui.el('h2', {}, 'Needs attention'),
          ui.el('ul', { class: 'attention' }, ...o.attention.map((a: string) => ui.el('li', {}, a))),
        )
      : ui.el('p', { class: 'muted' }, 'Nothing needs attention.'),
    ui.table(
      head,
      o.streams.flatMap((s: any) => streamRows(s, cluster)),
      [1, 2, 5, 7, 8, 9, 10],
      'Streams',
    ),
    ui.el('p', {}, `${ui.count(o.total, 'stream', 'streams')}, page ${o.page + 1} of ${pages}`),
    o.page > 0 ? ui.button('Previous page', 'prev:overview', turn(o.page - 1)) : null,
    o.page + 1 < pages ? ui.button('Next page', 'next:overview', turn(o.page + 1)) : null,
  ];
}

async function groupSection(key: string, g: any): Promise<Child[]> {
  const retries = g.retries;
  const connected = (c: any) => (c.connected === null ? 'unknown' : c.connected ? 'yes' : 'no');
  const consumers = g.consumers.map((c: any) => [
    c.name,
    ui.num(c.pending),
    ui.age(c.idleMs),
    c.inactiveMs === null ? 'n/a' : ui.age(c.inactiveMs),
    connected(c),
    // Its oldest pending entry's age from its id (an explicit id such as 1-1 is no time), and its idle time.
    c.oldestPendingId ? ui.age(ui.idAge(c.oldestPendingId)) : '–',
    ui.age(c.oldestPendingIdleMs),
  ]);
  const after = ui.state.after.get(`pel:${g.name}`);
  const pel = await ui.get(
    `api/pending?key=${encodeURIComponent(key)}&group=${encodeURIComponent(g.name)}&count=50${after ? `&after=${after}` : ''}`,
  );
  const rows = pel.entries.map((p: any) => [
    p.id,
    p.consumer,
    ui.age(p.idleMs),
    ui.num(p.deliveries),
    ui.age(p.reclaimableInMs),
    ui.pelStateLabel(p.state) + (p.retryInMs !== null ? ` (${ui.age(Math.abs(p.retryInMs))})` : ''),
    ui.link('View', `#/entry/${encodeURIComponent(key)}/${p.id}`),
  ]);
  const retry = retries.error
    ? `retry set unknown (${retries.error})`
    : `${ui.num(retries.waiting)} waiting for a retry, ${ui.num(retries.due)} due`;
  const o = g.ordering;
  const ordered = !o
    ? null
    : ui.el(
        'p',
        {},
        o.consumer === null
          ? `Ordered: no owner now; ${ui.num(o.members)} member(s) share the partitions`
          : `Ordered: owned by ${o.consumer} (epoch ${o.epoch}, lease ${ui.age(o.leaseMs)} left); ${ui.num(o.members)} member(s) share the partitions`,
      );
  const p = g.paused;
  const pausedLine = p
    ? ui.el(
        'p',
        { class: 'paused' },
        `Paused${p.at ? ` since ${new Date(p.at).toISOString()}` : ''}${p.by ? ` by ${p.by}` : ''}: nothing new is read`,
      )
    : null;
  // Anyone who may act sees the button; a read-only dashboard shows the state alone.
  const toggle = !ui.state.actions
    ? null
    : p
      ? ui.button('Resume', `resume:${g.name}`, () => void ui.act('api/resume', { key, group: g.name }, () => `resumed ${g.name}`))
      : ui.button('Pause', `pause:${g.name}`, () => void ui.act('api/pause', { key, group: g.name }, () => `paused ${g.name}`));
  return [
    ui.el('h2', {}, `Group ${g.name}`),
    pausedLine,
    toggle,
    ui.el(
      'p',
      {},
      `lag ${ui.num(g.lag)} (${ui.age(g.lagMs)}), pending ${ui.num(g.pending)}, last delivered ${g.lastDeliveredId}; ${retry}`,
    ),
    ordered,
    ui.table(
      ['Consumer', 'Pending', 'Idle', 'Inactive', 'Connected', 'Oldest pending age', 'Oldest pending idle'],
      consumers,
      [1],
      `Consumers of ${g.name}`,
    ),
    ui.el('h2', {}, `Pending entries of ${g.name}`),
    ui.table(['Id', 'Consumer', 'Idle', 'Deliveries', 'Reclaimable in', 'State', ''], rows, [2, 3, 4], `Pending entries of ${g.name}`),
    ...ui.pager(`pel:${g.name}`, pel.next),
  ];
}

/** Idempotent produce's counters and window (Redis 8.6), on a stream that had an idempotent write. */
function idempotencyLine(i: any): Child {
  if (!i || (i.iidsAdded === 0 && i.pidsTracked === 0)) return null;
  return ui.el(
    'p',
    {},
    `Idempotent writes: ${ui.num(i.iidsAdded)} added, ${ui.count(i.iidsDuplicates, 'duplicate', 'duplicates')}; ` +
      `window ${ui.num(i.windowSec)} s, ${ui.num(i.maxKeys)} keys per producer; ` +
      `${ui.count(i.iidsTracked, 'key', 'keys')} of ${ui.count(i.pidsTracked, 'producer', 'producers')} tracked`,
  );
}

/** Delayed entries waiting in the stream's schedule (docs/guide/flow-control.md): said when some wait, or when unreadable. */
function delayedLine(d: any): Child {
  if (d.error) return ui.el('p', {}, `Delayed entries unknown (${d.error})`);
  if (!d.waiting || d.nextDueInMs === null) return null;
  const next = d.nextDueInMs >= 0 ? `next due in ${ui.age(d.nextDueInMs)}` : `next past due by ${ui.age(-d.nextDueInMs)}`;
  return ui.el('p', { class: 'delayed' }, `Delayed: ${ui.count(d.waiting, 'entry waits', 'entries wait')}, ${next}`);
}

async function streamPage(key: string): Promise<Child[]> {
  const s = await ui.get(`api/stream?key=${encodeURIComponent(key)}`);
  const out: Child[] = [
    ui.el('h1', { class: 'name' }, s.stream),
    ui.el('p', {}, `${ui.count(s.length, 'entry', 'entries')}, last id ${s.lastGeneratedId}`),
    ui.headroom(s),
    idempotencyLine(s.idempotency),
    delayedLine(s.delayed),
  ];
  for (const g of s.groups) out.push(...(await groupSection(key, g)));
  const dead = s.deadLetters.map((d: any) =>
    ui.el(
      'li',
      {},
      ui.link(d.stream, `#/dead/${encodeURIComponent(d.stream)}`),
      ` ${d.length === null ? 'not a stream' : ui.num(d.length)}`,
    ),
  );
  out.push(ui.el('h2', {}, 'Dead letters'), dead.length ? ui.el('ul', {}, ...dead) : ui.el('p', { class: 'muted' }, 'none'));
  return out;
}

async function entryPage(key: string, id: string): Promise<Child[]> {
  const e = await ui.get(`api/entry?key=${encodeURIComponent(key)}&id=${encodeURIComponent(id)}${ui.state.entryFull ? '&full=1' : ''}`);
  const rows = e.fields.map(([f, v]: [string, string], i: number) => {
    let shown = v;
    try {
      shown = JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      // Not JSON (or cut): shown as it is.
    }
    const size = e.sizes[i][1];
    return [
      f,
      ui.el('pre', {}, shown),
      size > v.length ? `${ui.num(size)} bytes, first ${ui.num(v.length)} shown` : `${ui.num(size)} bytes`,
    ];
  });
  const more =
    e.truncated && !ui.state.entryFull ? ui.button('Show all', 'show-all', () => ((ui.state.entryFull = true), ui.rerender())) : null;
  const wide = e.fieldCount > e.fields.length ? ui.el('p', {}, `First ${e.fields.length} of ${e.fieldCount} fields shown.`) : null;
  const cut = e.truncated && ui.state.entryFull ? ui.el('p', {}, 'Values over 1 MB are cut here; XRANGE reads them whole.') : null;
  return [
    ui.el('h1', { class: 'name' }, `${e.stream} ${e.id}`),
    ui.table(['Field', 'Value (JSON shown decoded)', 'Size'], rows, [], 'Fields'),
    wide,
    more,
    cut,
  ];
}

async function deadListPage(): Promise<Child[]> {
  const d = await ui.get(`api/dead-letter-streams?page=${ui.state.page}`);
  const rows = d.streams.map((s: any) => [
    ui.link(s.stream, `#/dead/${encodeURIComponent(s.stream)}`),
    s.length === null ? 'not a stream' : ui.num(s.length),
  ]);
  return [
    ui.el('h1', {}, 'Dead letters'),
    rows.length
      ? ui.table(['Dead-letter stream', 'Letters'], rows, [1], 'Dead-letter streams')
      : ui.el('p', { class: 'muted' }, 'No dead-letter streams.'),
  ];
}

function deadActions(key: string, ids: string[], total: number): HTMLElement {
  if (!ui.state.actions) return ui.el('p', { class: 'muted' }, 'Read-only: actions are off.');
  const chosen = () => [...ui.state.selected];
  const moved = (reply: any) =>
    `redrove ${reply.results.filter((r: any) => r.newId).length}${reply.remaining ? `, ${reply.remaining} left` : ''}`;
  return ui.el(
    'p',
    {},
    ui.button('Redrive', 'redrive', () => ui.state.selected.size && void ui.act('api/dead-letters/redrive', { key, ids: chosen() }, moved)),
    ui.button(
      'Delete',
      'delete',
      () => ui.state.selected.size && void ui.act('api/dead-letters/delete', { key, ids: chosen() }, (r) => `deleted ${r.deleted.length}`),
    ),
    ui.button(
      'Redrive all',
      'redrive-all',
      () =>
        confirm(`Redrive the oldest ${Math.min(total, 1000)} letters of ${key}?`) &&
        void ui.act('api/dead-letters/redrive', { key, ids: 'all' }, moved),
    ),
    ui.button('Select all shown', 'select-all', () => (ids.forEach((i) => ui.state.selected.add(i)), ui.rerender())),
  );
}

function letterRow(key: string, l: any): Child[] {
  const toggle = (ev: Event) => {
    if ((ev.target as HTMLInputElement).checked) ui.state.selected.add(l.id);
    else ui.state.selected.delete(l.id);
  };
  return [
    ui.state.actions
      ? ui.el('input', {
          type: 'checkbox',
          'aria-label': `Select ${l.id}`,
          'data-focus': `sel:${l.id}`,
          checked: ui.state.selected.has(l.id),
          onchange: toggle,
        })
      : null,
    l.id,
    l.stream,
    l.sourceId,
    ui.el('span', { class: 'bad' }, l.error + (l.errorTruncated ? ' …' : '')),
    ui.num(l.deliveryCount),
    ui.when(l.deadAt),
    `${l.group} / ${l.consumer}`,
    `${ui.num(l.fieldsBytes)} bytes`,
    ui.link('View', `#/entry/${encodeURIComponent(key)}/${encodeURIComponent(l.id)}`),
  ];
}

async function deadPage(key: string): Promise<Child[]> {
  const after = ui.state.after.get(`dead:${key}`);
  const q = `key=${encodeURIComponent(key)}&count=50${after ? `&after=${after}` : ''}${ui.state.reason ? `&reason=${encodeURIComponent(ui.state.reason)}` : ''}`;
  const d = await ui.get(`api/dead-letters?${q}`);
  const head = [
    ui.state.actions ? 'Select' : '',
    'Id',
    'Source stream',
    'Source id',
    'Reason',
    'Deliveries',
    'Dead at',
    'Group / consumer',
    'Entry',
    '',
  ];
  const filter = (ev: Event) => {
    ui.state.reason = (ev.target as HTMLInputElement).value;
    ui.rerender();
  };
  return [
    ui.el('h1', { class: 'name' }, `Dead letters of ${key}`),
    ui.el('p', {}, ui.count(d.length, 'letter', 'letters')),
    ui.el(
      'label',
      {},
      'Filter by reason (this page) ',
      ui.el('input', { type: 'search', value: ui.state.reason, 'data-focus': 'reason', oninput: filter }),
    ),
    deadActions(
      key,
      d.letters.map((l: any) => l.id),
      d.length,
    ),
    ui.state.message ? ui.el('p', { role: 'alert' }, ui.state.message) : null,
    ui.table(
      head,
      d.letters.map((l: any) => letterRow(key, l)),
      [4],
      'Dead letters',
    ),
    ...ui.pager(`dead:${key}`, d.next),
  ];
}

/** The pages, for app-script.ts to send and route to. */
export const PAGE_PARTS = {
  streamRows,
  overviewPage,
  groupSection,
  idempotencyLine,
  delayedLine,
  streamPage,
  entryPage,
  deadListPage,
  deadActions,
  letterRow,
  deadPage,
};
export type Pages = typeof PAGE_PARTS;
