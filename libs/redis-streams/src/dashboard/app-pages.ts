/* The dashboard's browser code, part 3 of 5: the pages (overview, stream, entry, dead letters).
 * Sent as source with the other parts (app-script.ts); reaches them through `ui` only. */
import type { AppState, Child, Dom } from './app-dom.js';
import type { Charts } from './app-charts.js';
import type { Panels } from './app-panels.js';

/** Made by the served script (app-script.ts), not by this module. */
declare const ui: Dom & Charts & Panels & { state: AppState };

type State = 'healthy' | 'attention' | 'failing';

/** A group's state: failing when nobody connected holds what waits, attention when something waits long. */
function groupState(g: any, minIdleMs: number): State {
  const connected = g.consumers.some((c: any) => c.connected !== false);
  if ((g.pending > 0 || g.lag > 0) && g.consumers.length > 0 && !connected) return 'failing';
  if ((g.lagMs ?? 0) >= 60_000 || g.consumers.some((c: any) => (c.oldestPendingIdleMs ?? 0) > minIdleMs) || (g.retries?.due ?? 0) > 0)
    return 'attention';
  return 'healthy';
}

function worst(states: State[]): State {
  return states.includes('failing') ? 'failing' : states.includes('attention') ? 'attention' : 'healthy';
}

function streamRows(s: any, cluster: boolean, minIdleMs: number): Child[][] {
  const dead = s.deadLetters.find((d: any) => d.length > 0);
  const groups = s.groups.length ? s.groups : [null];
  return groups.map((g: any, i: number) => {
    const first = i === 0;
    return [
      first ? ui.el('span', { class: 'name' }, ui.link(s.stream, ui.hash('stream', s.stream), `s:${s.stream}`)) : '',
      first ? ui.num(s.length) : '',
      first ? ui.rate(s.producedPerSec) : '',
      g ? ui.link(g.name, `${ui.hash('stream', s.stream, g.name)}`) : '–',
      g ? ui.num(g.lag) : '–',
      g ? ui.age(g.lagMs) : '–',
      g ? ui.num(g.pending) : '–',
      g ? ui.num(g.consumerCount) : '–',
      g ? ui.rate(g.consumedPerSec) : '–',
      first ? (dead ? ui.link(ui.num(dead.length), ui.hash('dead', dead.stream)) : '0') : '',
      g ? ui.chip(groupState(g, minIdleMs)) : '',
      ...(cluster ? [first ? ui.el('span', { class: 'mono' }, s.node) : ''] : []),
    ];
  });
}

/** What the charts and the summary add up, over the streams shown (the overview's page, or one stream). */
interface Figures {
  groups: any[];
  lag: number;
  pending: number;
  dead: number;
  produced: number | null;
  consumed: number | null;
}

function figures(streams: any[]): Figures {
  const groups = streams.flatMap((s: any) => s.groups);
  const sum = (xs: any[], of: (x: any) => number | null) => xs.reduce((n: number, x: any) => n + (of(x) ?? 0), 0);
  const known = (xs: any[], of: (x: any) => number | null) => (xs.some((x) => of(x) !== null) ? sum(xs, of) : null);
  return {
    groups,
    lag: sum(groups, (g) => g.lag),
    pending: sum(groups, (g) => g.pending),
    dead: sum(streams, (s) => sum(s.deadLetters, (d) => d.length)),
    produced: known(streams, (s) => s.producedPerSec),
    consumed: known(groups, (g) => g.consumedPerSec),
  };
}

/** The whole page's health first: streams, lag, pending, dead letters and consumers, each with its state. */
function summaryStrip(o: any, f: Figures, minIdleMs: number): HTMLElement {
  const { groups, dead } = f;
  const oldest = Math.max(0, ...groups.map((g: any) => g.lagMs ?? 0));
  const consumers = groups.flatMap((g: any) => g.consumers);
  const gone = consumers.filter((c: any) => c.connected === false && c.pending > 0).length;
  const unreadable = o.attentionItems.some((a: any) => / could not be read /.test(a.text));
  const grew = o.attentionItems.some((a: any) => / grew by /.test(a.text));
  const stat = (label: string, value: string, state: State, note: string) =>
    ui.el(
      'div',
      { class: `stat ${state}`, role: 'group', 'aria-label': label },
      ui.el('div', { class: 'label' }, label),
      ui.el('div', { class: 'value', 'data-stat': label }, value),
      ui.chip(state, note),
    );
  const scope = o.total > o.streams.length ? ' (this page)' : '';
  const pendingState = worst(groups.map((g: any) => groupState(g, minIdleMs)));
  return ui.el(
    'div',
    { class: 'strip', role: 'region', 'aria-label': 'Summary' },
    stat('Streams', ui.num(o.total), unreadable ? 'failing' : 'healthy', unreadable ? 'unreadable' : scope ? 'this page read' : 'all read'),
    stat(
      `Lag${scope}`,
      ui.num(f.lag),
      oldest >= 600_000 ? 'failing' : oldest >= 60_000 ? 'attention' : 'healthy',
      oldest ? `oldest ${ui.age(oldest)}` : 'none waits',
    ),
    stat(
      `Pending${scope}`,
      ui.num(f.pending),
      pendingState,
      pendingState === 'failing'
        ? 'held by gone consumers'
        : pendingState === 'attention'
          ? 'waiting long'
          : `${ui.num(groups.reduce((n: number, g: any) => n + (g.retries?.waiting ?? 0), 0))} retrying`,
    ),
    stat(
      `Dead letters${scope}`,
      ui.num(dead),
      grew ? 'failing' : dead > 0 ? 'attention' : 'healthy',
      grew ? 'growing' : dead > 0 ? 'to look at' : 'none',
    ),
    stat(
      `Consumers${scope}`,
      ui.num(consumers.length),
      gone > 0 ? 'failing' : 'healthy',
      gone > 0 ? `${gone} gone with work` : 'connected',
    ),
  );
}

/** An attention line as a link to the page it names. */
function attentionLink(a: any): Child {
  const to =
    a.page === 'dead'
      ? ui.hash('dead', a.key)
      : a.page === 'entry'
        ? ui.hash('entry', a.key, a.id)
        : a.group !== undefined
          ? ui.hash('stream', a.key, a.group)
          : ui.hash('stream', a.key);
  return ui.el('li', {}, ui.link(a.text, to));
}

async function overviewPage(): Promise<Child[]> {
  const o = await ui.get(`api/overview?page=${ui.state.page}`);
  const { minIdleMs } = ui.state;
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
    ui.el('h1', {}, 'Overview'),
    ui.el('p', { class: 'muted small' }, `Server: ${o.server}`),
    summaryStrip(o, f, minIdleMs),
    o.attentionItems.length
      ? ui.card('Needs attention', ui.el('ul', { class: 'attention-list' }, ...o.attentionItems.map(attentionLink)))
      : ui.el('p', { class: 'notice ok', role: 'status' }, '● Nothing needs attention.'),
    ...(await ui.consumerPanel()),
    chartsSection(`overview:${ui.state.page}`, f),
    ui.card(
      'Streams',
      ui.table(
        head,
        o.streams.flatMap((s: any) => streamRows(s, cluster, minIdleMs)),
        [1, 2, 4, 5, 6, 7, 8, 9],
        'Streams',
        `No stream with a consumer group matches. Create one (XGROUP CREATE <stream> <group> $ MKSTREAM) or start a worker.`,
      ),
      ui.el('p', { class: 'small muted' }, `${ui.count(o.total, 'stream', 'streams')}, page ${o.page + 1} of ${pages}`),
      o.page > 0 ? ui.button('Previous page', 'prev:overview', turn(o.page - 1)) : null,
      o.page + 1 < pages ? ui.button('Next page', 'next:overview', turn(o.page + 1)) : null,
    ),
  ];
}

/** The three charts of a page (the overview's streams, or one stream): lag and pending, rates, dead letters. */
function chartsSection(key: string, f: Omit<Figures, 'groups'> & { producedBefore?: number[] }): HTMLElement {
  return ui.el(
    'section',
    { 'aria-label': 'Charts' },
    ui.windowPicker(),
    ui.el(
      'div',
      { class: 'charts' },
      ui.chart(
        `${key}:lag`,
        'Lag and pending (entries)',
        [
          { name: 'lag', color: '--c1', value: f.lag },
          { name: 'pending', color: '--c2', value: f.pending },
        ],
        ui.fmtEntries,
      ),
      ui.chart(
        `${key}:rates`,
        'Produced and consumed (entries/s)',
        [
          { name: 'produced', color: '--c3', value: f.produced, ...(f.producedBefore ? { before: f.producedBefore } : {}) },
          { name: 'consumed', color: '--c1', value: f.consumed },
        ],
        ui.fmtPerSec,
      ),
      ui.chart(`${key}:dead`, 'Dead letters (entries)', [{ name: 'dead letters', color: '--c4', value: f.dead }], ui.fmtEntries),
    ),
  );
}

/** The buttons of one pending entry: release, dead-letter, and retry-now for one waiting for its retry. */
function pendingActions(key: string, group: string, p: any): Child {
  if (!ui.state.actions) return null;
  const body = { key, group, id: p.id };
  const waiting = p.state === 'retry-waiting' || p.state === 'retry-due';
  return ui.el(
    'span',
    { class: 'row-actions' },
    ui.button(
      'Release',
      `release:${p.id}`,
      () =>
        void ui.actOnPending(
          'api/pending/release',
          body,
          `Release ${p.id}?\n\nIt stays pending under "${ui.named(p.consumer)}", its idle time set past minIdleMs: the next worker that beats takes it and runs it again (delivery ${p.deliveries + 1}).`,
          (r) => `released ${p.id} (owner ${r.owner})`,
        ),
      'small',
      `Release ${p.id}`,
    ),
    ui.button(
      'Dead-letter',
      `dead-letter:${p.id}`,
      () =>
        void ui.actOnPending(
          'api/pending/dead-letter',
          body,
          `Dead-letter ${p.id}?\n\nIt is moved to the dead-letter stream with its fields and acked in the group: no handler runs it again unless you redrive it.`,
          (r) => `dead-lettered ${p.id} as ${r.deadLetterId}`,
        ),
      'small danger',
      `Dead-letter ${p.id}`,
    ),
    waiting
      ? ui.button(
          'Retry now',
          `retry-now:${p.id}`,
          () =>
            void ui.actOnPending(
              'api/pending/retry-now',
              body,
              `Retry ${p.id} now?\n\nIts retry is made due now and the entry released: the next worker that beats takes it and runs it (delivery ${p.deliveries + 1}).`,
              (r) => `${p.id} due now (owner ${r.owner})`,
            ),
          'small',
          `Retry ${p.id} now`,
        )
      : null,
  );
}

async function groupSection(key: string, g: any): Promise<Child[]> {
  const retries = g.retries;
  const connected = (c: any) => (c.connected === null ? 'unknown' : c.connected ? '● yes' : '✖ no');
  const consumers = g.consumers.map((c: any) => [
    ui.el('span', { class: 'name' }, c.name),
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
    ui.link(ui.idCell(p.id), ui.hash('entry', key, p.id)),
    ui.el('span', { class: 'name' }, p.consumer),
    ui.age(p.idleMs),
    ui.num(p.deliveries),
    ui.age(p.reclaimableInMs),
    ui.pelStateLabel(p.state) + (p.retryInMs !== null ? ` (${ui.age(Math.abs(p.retryInMs))})` : ''),
    pendingActions(key, g.name, p),
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
        o.durability
          ? ui.el(
              'span',
              { class: o.durability.state === 'held' || o.durability.state === 'degraded' ? 'notice' : '' },
              ui.durabilityLabel(o.durability),
            )
          : '',
      );
  const p = g.paused;
  const pausedLine = p
    ? ui.el(
        'p',
        { class: 'notice paused' },
        `Paused`,
        p.at ? ' since ' : '',
        p.at ? ui.when(p.at) : '',
        `${p.by ? ` by ${p.by}` : ''}: nothing new is read`,
      )
    : null;
  // Anyone who may act sees the button; a read-only dashboard shows the state alone.
  const toggle = !ui.state.actions
    ? null
    : p
      ? ui.button(
          'Resume',
          `resume:${g.name}`,
          () => void ui.act('api/resume', { key, group: g.name }, () => `resumed ${g.name}`),
          'primary',
        )
      : ui.button('Pause', `pause:${g.name}`, () => void ui.act('api/pause', { key, group: g.name }, () => `paused ${g.name}`));
  return [
    ui.el(
      'section',
      { class: 'card', id: `group-${g.name}`, 'aria-label': `Group ${g.name}` },
      ui.el('h2', {}, `Group ${g.name} `, ui.chip(groupState(g, ui.state.minIdleMs))),
      pausedLine,
      toggle,
      ui.el(
        'div',
        { class: 'facts' },
        ui.el('span', {}, 'lag ', ui.el('strong', {}, ui.num(g.lag)), ` (${ui.age(g.lagMs)})`),
        ui.el('span', {}, 'pending ', ui.el('strong', {}, ui.num(g.pending))),
        ui.el('span', {}, 'last delivered ', ui.idCell(g.lastDeliveredId)),
        ui.el('span', {}, retry),
      ),
      ordered,
      ui.el('h3', {}, 'Consumers'),
      ui.table(
        ['Consumer', 'Pending', 'Idle', 'Inactive', 'Connected', 'Oldest pending age', 'Oldest pending idle'],
        consumers,
        [1, 2, 3, 5, 6],
        `Consumers of ${g.name}`,
        'No consumer has read from this group yet.',
      ),
      ui.el('h3', {}, `Pending entries of ${g.name}`),
      ui.table(
        ['Id', 'Consumer', 'Idle', 'Deliveries', 'Reclaimable in', 'State', ui.state.actions ? 'Actions' : ''],
        rows,
        [2, 3, 4],
        `Pending entries of ${g.name}`,
        'Nothing pending: every delivered entry was acknowledged.',
      ),
      ...ui.pager(`pel:${g.name}`, pel.next),
    ),
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
  const orphaned = d.orphaned ? `; ${ui.count(d.orphaned, 'value', 'values')} without a schedule` : '';
  if (!d.waiting || d.nextDueInMs === null) return orphaned ? ui.el('p', { class: 'delayed' }, `Delayed: none waits${orphaned}`) : null;
  const next = d.nextDueInMs >= 0 ? `next due in ${ui.age(d.nextDueInMs)}` : `next past due by ${ui.age(-d.nextDueInMs)}`;
  return ui.el('p', { class: 'delayed' }, `Delayed: ${ui.count(d.waiting, 'entry waits', 'entries wait')}, ${next}${orphaned}`);
}

/** An entry's fields on one line, each value cut at 80 characters (put in as text, like everything from Redis). */
function preview(fields: [string, string][]): string {
  return fields.map(([f, v]) => `${f}=${v.length > 80 ? `${v.slice(0, 80)}…` : v}`).join('  ');
}

/** The stream's entries, newest first, paged; search by an id range and by a field's value (within a bounded window). */
async function entriesSection(key: string): Promise<Child> {
  const q = ui.state.search;
  const before = ui.state.after.get(`entries:${key}`);
  const params = new URLSearchParams({ key, count: '20' });
  if (before) params.set('before', before);
  if (q.from) params.set('from', q.from);
  if (q.to) params.set('to', q.to);
  if (q.field) {
    params.set('field', q.field);
    params.set('value', q.value);
  }
  // A search is read once per asking (it reads up to its window); the plain list follows the stream.
  const asked = params.toString();
  const page = q.field && ui.state.found?.params === asked ? ui.state.found.page : await ui.get(`api/entries?${asked}`);
  ui.state.found = q.field ? { params: asked, page } : null;
  const rows = page.entries.map((e: any) => [
    ui.link(ui.idCell(e.id), ui.hash('entry', key, e.id)),
    ui.when(Number(e.id.split('-')[0])),
    ui.el('span', { class: 'name small' }, preview(e.fields)),
  ]);
  const input = (name: 'from' | 'to' | 'field' | 'value', label: string, hint: string) =>
    ui.el(
      'label',
      {},
      label,
      ui.el('input', { type: 'text', name, value: q[name], placeholder: hint, 'data-focus': `search:${name}`, 'aria-label': label }),
    );
  const search = (ev: Event) => {
    ev.preventDefault();
    const form = new FormData(ev.target as HTMLFormElement);
    for (const name of ['from', 'to', 'field', 'value'] as const) ui.state.search[name] = String(form.get(name) ?? '').trim();
    ui.state.after.delete(`entries:${key}`);
    ui.rerender();
  };
  const clear = (ev: Event) => {
    // The form is kept across refreshes (data-keep): emptied here, and the search with it.
    (ev.target as HTMLElement).closest('form')?.reset();
    Object.assign(ui.state.search, { from: '', to: '', field: '', value: '' });
    ui.state.after.delete(`entries:${key}`);
    ui.rerender();
  };
  const searched = q.field
    ? `${ui.num(page.read)} entries read (at most ${ui.num(page.window)} a page), ${ui.count(page.entries.length, 'match', 'matches')}`
    : '';
  return ui.card(
    'Entries',
    ui.el(
      'form',
      { class: 'form', onsubmit: search, role: 'search', 'aria-label': 'Search entries', 'data-keep': `search:${key}` },
      input('from', 'From id or ms', '1700000000000-0'),
      input('to', 'To id or ms', 'newest'),
      input('field', 'Field', 'data'),
      input('value', 'Contains', 'order-42'),
      ui.el('button', { type: 'submit', class: 'primary', 'data-focus': 'search' }, 'Search'),
      ui.button('Clear', 'search-clear', clear),
    ),
    searched ? ui.el('p', { class: 'small muted' }, searched) : null,
    ui.table(
      ['Id', 'Added', 'Fields (first 200 bytes of each)'],
      rows,
      [],
      'Entries',
      q.field || q.from || q.to ? 'No entry matches in this window.' : 'The stream is empty.',
    ),
    before ? ui.button('Newest', `newest:${key}`, () => (ui.state.after.delete(`entries:${key}`), ui.rerender())) : null,
    page.next
      ? ui.button(
          q.field ? 'Search older' : 'Older',
          `older:${key}`,
          () => (ui.state.after.set(`entries:${key}`, page.next), ui.rerender()),
        )
      : null,
  );
}

async function streamPage(key: string, group?: string): Promise<Child[]> {
  const s = await ui.get(`api/stream?key=${encodeURIComponent(key)}`);
  const groups = group === undefined ? s.groups : s.groups.filter((g: any) => g.name === group);
  const out: Child[] = [
    ui.el('p', { class: 'small' }, ui.link('Overview', '#/'), ' / stream'),
    ui.el('h1', { class: 'name' }, s.stream),
    ui.el(
      'div',
      { class: 'facts' },
      ui.el('span', {}, ui.el('strong', {}, ui.count(s.length, 'entry', 'entries'))),
      ui.el('span', {}, 'last id ', ui.idCell(s.lastGeneratedId)),
      ui.el('span', {}, ui.count(s.groups.length, 'group', 'groups')),
      group !== undefined ? ui.el('span', {}, `group ${group} only · `, ui.link('all groups', ui.hash('stream', key))) : null,
    ),
    ui.headroom(s),
    idempotencyLine(s.idempotency),
    delayedLine(s.delayed),
    ui.state.message ? ui.el('p', { role: 'alert', class: 'notice' }, ui.state.message) : null,
    chartsSection(`stream:${key}`, { ...figures([s]), producedBefore: s.producedHistory.slice(0, -1) }),
  ];
  for (const g of groups) out.push(...(await groupSection(key, g)));
  if (group !== undefined && groups.length === 0)
    out.push(ui.el('p', { role: 'alert', class: 'notice' }, `No group "${group}" on this stream.`));
  out.push(await entriesSection(key));
  const deadRows = s.deadLetters.map((d: any) => [
    ui.link(d.stream, ui.hash('dead', d.stream)),
    d.length === null ? 'not a stream' : ui.num(d.length),
  ]);
  out.push(
    ui.card(
      'Dead letters',
      ui.table(
        ['Dead-letter stream', 'Letters'],
        deadRows,
        [1],
        'Dead-letter streams of this stream',
        'None: no entry of this stream was dead-lettered.',
      ),
    ),
  );
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
      ui.el('span', { class: 'name' }, f),
      ui.el('pre', {}, shown),
      size > v.length ? `${ui.num(size)} bytes, first ${ui.num(v.length)} shown` : `${ui.num(size)} bytes`,
    ];
  });
  const more =
    e.truncated && !ui.state.entryFull ? ui.button('Show all', 'show-all', () => ((ui.state.entryFull = true), ui.rerender())) : null;
  const wide = e.fieldCount > e.fields.length ? ui.el('p', {}, `First ${e.fields.length} of ${e.fieldCount} fields shown.`) : null;
  const cut = e.truncated && ui.state.entryFull ? ui.el('p', {}, 'Values over 1 MB are cut here; XRANGE reads them whole.') : null;
  return [
    ui.el(
      'p',
      { class: 'small' },
      ui.link('Overview', '#/'),
      ' / ',
      ui.link(e.stream, ui.hash(/[:/]dead(?::\d+)?$/.test(e.stream) ? 'dead' : 'stream', e.stream)),
      ' / entry',
    ),
    ui.el('h1', { class: 'name' }, `${e.stream} `, ui.idCell(e.id)),
    ui.el('p', { class: 'muted' }, 'Added ', ui.when(Number(String(e.id).split('-')[0]))),
    ui.card(null, ui.table(['Field', 'Value (JSON shown decoded)', 'Size'], rows, [2], 'Fields'), wide, more, cut),
  ];
}

async function deadListPage(): Promise<Child[]> {
  const d = await ui.get(`api/dead-letter-streams?page=${ui.state.page}`);
  const rows = d.streams.map((s: any) => [
    ui.link(s.stream, ui.hash('dead', s.stream)),
    s.length === null ? 'not a stream' : ui.num(s.length),
  ]);
  return [
    ui.el('h1', {}, 'Dead letters'),
    ui.card(
      null,
      ui.table(
        ['Dead-letter stream', 'Letters'],
        rows,
        [1],
        'Dead-letter streams',
        'No dead-letter streams: no entry has been given up on.',
      ),
    ),
  ];
}

function deadActions(key: string, ids: string[], total: number): HTMLElement {
  if (!ui.state.actions) return ui.el('p', { class: 'muted' }, 'Read-only: actions are off.');
  const chosen = () => [...ui.state.selected];
  const moved = (reply: any) =>
    `redrove ${reply.results.filter((r: any) => r.newId).length}${reply.remaining ? `, ${reply.remaining} left` : ''}`;
  const redrive = () => {
    const n = ui.state.selected.size;
    if (
      n &&
      confirm(
        `Redrive ${ui.count(n, 'letter', 'letters')} of ${ui.named(key)}?\n\nEach goes back to its stream as a new entry (its handler runs it again) and leaves the dead-letter stream.`,
      )
    )
      void ui.act('api/dead-letters/redrive', { key, ids: chosen() }, moved);
  };
  const remove = () => {
    const ids = chosen();
    if (
      !ids.length ||
      !confirm(
        `Delete ${ui.count(ids.length, 'letter', 'letters')} of ${ui.named(key)}?\n\nThey are removed from Redis for good after 5 seconds, unless you press Undo.`,
      )
    )
      return;
    ui.state.selected.clear();
    ui.later(
      `Deleting ${ui.count(ids.length, 'letter', 'letters')} in 5 s`,
      5000,
      () => void ui.act('api/dead-letters/delete', { key, ids }, (r) => `deleted ${r.deleted.length}`),
    );
    ui.rerender();
  };
  return ui.el(
    'p',
    {},
    ui.button('Redrive', 'redrive', redrive, 'primary'),
    ui.button('Delete', 'delete', remove, 'danger'),
    ui.button(
      'Redrive all',
      'redrive-all',
      () =>
        confirm(
          `Redrive the oldest ${ui.num(Math.min(total, 1000))} letters of ${ui.named(key)}?\n\nEach goes back to its stream as a new entry.`,
        ) && void ui.act('api/dead-letters/redrive', { key, ids: 'all' }, moved),
    ),
    ui.button('Select all shown', 'select-all', () => (ids.forEach((i) => ui.state.selected.add(i)), ui.rerender())),
  );
}

function letterRow(key: string, l: any): Child[] {
  const toggle = (ev: Event) => {
    if ((ev.target as HTMLInputElement).checked) ui.state.selected.add(l.id);
    else ui.state.selected.delete(l.id);
  };
  const reason = ui.el(
    'div',
    { class: 'name reason' },
    ui.el('span', { class: 'bad' }, l.error + (l.errorTruncated ? ' …' : '')),
    l.stack
      ? ui.el(
          'details',
          {},
          ui.el('summary', {}, 'Stack'),
          ui.el('pre', {}, l.stack.split('\n').map(ui.named).join('\n') + (l.stackTruncated ? '\n…' : '')),
        )
      : null,
  );
  return [
    ...(ui.state.actions
      ? [
          ui.el('input', {
            type: 'checkbox',
            'aria-label': `Select ${l.id}`,
            'data-focus': `sel:${l.id}`,
            checked: ui.state.selected.has(l.id),
            onchange: toggle,
          }),
        ]
      : []),
    ui.idCell(l.id),
    ui.link(l.stream, ui.hash('stream', l.stream)),
    ui.link(ui.idCell(l.sourceId), ui.hash('entry', l.stream, l.sourceId)),
    reason,
    ui.num(l.deliveryCount),
    ui.when(l.deadAt),
    ui.el('span', { class: 'name' }, `${l.group} / ${l.consumer}`),
    ui.el('span', { class: 'nowrap' }, `${ui.num(l.fieldsBytes)} bytes`),
    ui.link('View', ui.hash('entry', key, l.id)),
  ];
}

async function deadPage(key: string): Promise<Child[]> {
  const after = ui.state.after.get(`dead:${key}`);
  const q = `key=${encodeURIComponent(key)}&count=50${after ? `&after=${after}` : ''}${ui.state.reason ? `&reason=${encodeURIComponent(ui.state.reason)}` : ''}`;
  const d = await ui.get(`api/dead-letters?${q}`);
  const head = [
    ...(ui.state.actions ? ['Select'] : []),
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
    ui.el('p', { class: 'small' }, ui.link('Dead letters', '#/dead'), ' / stream'),
    ui.el('h1', { class: 'name' }, `Dead letters of ${key}`),
    ui.el('p', {}, ui.count(d.length, 'letter', 'letters')),
    ui.el(
      'p',
      { class: 'form' },
      ui.el(
        'label',
        {},
        'Filter by reason (this page)',
        ui.el('input', { type: 'search', value: ui.state.reason, 'data-focus': 'reason', oninput: filter }),
      ),
    ),
    deadActions(
      key,
      d.letters.map((l: any) => l.id),
      d.length,
    ),
    ui.state.message ? ui.el('p', { role: 'alert', class: 'notice' }, ui.state.message) : null,
    ui.card(
      null,
      ui.table(
        head,
        d.letters.map((l: any) => letterRow(key, l)),
        [head.indexOf('Deliveries')],
        'Dead letters',
        d.length ? 'No letter on this page matches the filter.' : 'No dead letters here.',
      ),
      ...ui.pager(`dead:${key}`, d.next),
    ),
  ];
}

/** The pages, for app-script.ts to send and route to. */
export const PAGE_PARTS = {
  groupState,
  worst,
  streamRows,
  figures,
  summaryStrip,
  attentionLink,
  overviewPage,
  chartsSection,
  pendingActions,
  groupSection,
  idempotencyLine,
  delayedLine,
  preview,
  entriesSection,
  streamPage,
  entryPage,
  deadListPage,
  deadActions,
  letterRow,
  deadPage,
};
export type Pages = typeof PAGE_PARTS;
