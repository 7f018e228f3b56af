/* The dashboard's browser code. It is sent as this function's source (dashboard-page.ts), so it
 * must not use anything outside itself. Everything from Redis is put in the page as text
 * (textContent, never HTML), and links are built from encodeURIComponent'd names only. */
export function dashboardApp(): void {
  const app = document.getElementById('app')!;
  const status = document.getElementById('status')!;
  const ACTION_HEADERS = { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' };
  const REFRESH_MS = 1000;
  let config = { actions: false, minIdleMs: 30000 };
  const state = { selected: new Set<string>(), reason: '', after: new Map<string, string>(), entryFull: false, last: '', message: '' };

  type Child = Node | string | number | null | undefined | false;
  function el(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v as EventListener);
      else if (k === 'checked') (e as HTMLInputElement).checked = Boolean(v);
      else if (k === 'value') (e as HTMLInputElement).value = String(v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(typeof c === 'object' ? c : String(c));
    return e;
  }
  const link = (text: string, hash: string, focus?: string) => el('a', { href: hash, 'data-focus': focus }, text);
  const enc = encodeURIComponent;
  const num = (n: number | null | undefined) => (n === null || n === undefined ? '–' : Math.round(n).toLocaleString('en-US'));
  const rate = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n < 10 ? n.toFixed(1) : num(n));
  function age(ms: number | null | undefined): string {
    if (ms === null || ms === undefined || ms < 0) return '–';
    if (ms < 1000) return `${ms} ms`;
    if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
    if (ms < 7200000) return `${(ms / 60000).toFixed(1)} min`;
    return ms < 172800000 ? `${(ms / 3600000).toFixed(1)} h` : `${(ms / 86400000).toFixed(1)} d`;
  }
  function table(head: string[], rows: Child[][], numeric: number[] = [], label = ''): HTMLElement {
    const cls = (i: number) => (numeric.includes(i) ? 'n' : undefined);
    return el(
      'table',
      { 'aria-label': label || undefined },
      el('thead', {}, el('tr', {}, ...head.map((h, i) => el('th', { class: cls(i), scope: 'col' }, h)))),
      el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((c, i) => el('td', { class: cls(i) }, c))))),
    );
  }
  function spark(values: number[]): Node {
    const svgNs = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(svgNs, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('width', '90');
    svg.setAttribute('height', '20');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `produced per second, last ${values.length} refreshes`);
    const shown = values.slice(-60);
    const max = Math.max(1, ...shown);
    const line = document.createElementNS(svgNs, 'polyline');
    line.setAttribute('fill', 'none');
    line.setAttribute('stroke', 'currentColor');
    line.setAttribute('points', shown.map((v, i) => `${(i * 90) / Math.max(1, shown.length - 1)},${19 - (v / max) * 18}`).join(' '));
    svg.append(line);
    return svg;
  }

  async function get(path: string): Promise<any> {
    const r = await fetch(path, { cache: 'no-store' });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ?? r.statusText);
    return body;
  }
  async function act(path: string, body: unknown, done: string): Promise<void> {
    const r = await fetch(path, { method: 'POST', headers: ACTION_HEADERS, body: JSON.stringify(body) });
    const reply = await r.json();
    state.message = r.ok
      ? done.replace('{n}', String((reply.results ?? reply.deleted ?? []).filter((x: any) => typeof x === 'string' || x.newId).length))
      : `refused: ${reply.error}`;
    state.selected.clear();
    state.last = '';
    void render();
  }

  function overview(o: any): Child[] {
    const rows: Child[][] = [];
    for (const s of o.streams) {
      const dead = s.deadLetters.reduce((n: number, d: any) => n + d.length, 0);
      const groups = s.groups.length ? s.groups : [null];
      groups.forEach((g: any, i: number) => {
        const first = i === 0;
        rows.push([
          first ? el('span', { class: 'name' }, link(s.stream, `#/stream/${enc(s.stream)}`, `s:${s.stream}`)) : '',
          first ? num(s.length) : '',
          first ? rate(s.producedPerSec) : '',
          first ? spark(s.producedHistory) : '',
          g ? g.name : '–',
          g ? num(g.lag) : '–',
          g ? age(s.lagMs[g.name]) : '–',
          g ? num(g.pending) : '–',
          g ? num(g.consumers.length) : '–',
          g ? rate(s.consumedPerSec[g.name]) : '–',
          first ? (dead > 0 ? link(num(dead), `#/dead/${enc(s.deadLetters.find((d: any) => d.length > 0).stream)}`) : '0') : '',
        ]);
      });
    }
    const pages = Math.ceil(o.total / o.pageSize);
    return [
      el('h1', {}, 'Overview'),
      o.attention.length
        ? el(
            'section',
            { 'aria-label': 'Needs attention' },
            el('h2', {}, 'Needs attention'),
            el('ul', { class: 'attention' }, ...o.attention.map((a: string) => el('li', {}, a))),
          )
        : el('p', { class: 'muted' }, 'Nothing needs attention.'),
      table(
        ['Stream', 'Length', 'Produced/s', 'Trend', 'Group', 'Lag', 'Lag age', 'Pending', 'Consumers', 'Consumed/s', 'Dead letters'],
        rows,
        [1, 2, 5, 7, 8, 9, 10],
        'Streams',
      ),
      pages > 1
        ? el('p', {}, `${o.total} streams, page ${o.page + 1} of ${pages} (${o.pageSize} a page)`)
        : el('p', { class: 'muted' }, `${o.total} streams`),
    ];
  }

  async function streamPage(key: string): Promise<Child[]> {
    const s = await get(`api/stream?key=${enc(key)}`);
    const out: Child[] = [el('h1', { class: 'name' }, s.stream), el('p', {}, `${num(s.length)} entries, last id ${s.lastGeneratedId}`)];
    for (const g of s.groups) {
      out.push(
        el('h2', {}, `Group ${g.name}`),
        el('p', {}, `lag ${num(g.lag)}, pending ${num(g.pending)}, last delivered ${g.lastDeliveredId}`),
      );
      out.push(
        table(
          ['Consumer', 'Pending', 'Idle', 'Inactive', 'Connected', 'Oldest pending age'],
          g.consumers.map((c: any) => [
            c.name,
            num(c.pending),
            age(c.idleMs),
            c.inactiveMs === null ? 'n/a' : age(c.inactiveMs),
            c.connected === null ? 'unknown' : c.connected ? 'yes' : 'no',
            age(c.oldestPendingAgeMs),
          ]),
          [1],
          `Consumers of ${g.name}`,
        ),
      );
      const after = state.after.get(g.name);
      const pel = await get(`api/pending?key=${enc(key)}&group=${enc(g.name)}&count=50${after ? `&after=${enc(after)}` : ''}`);
      const states: Record<string, string> = {
        'retry-waiting': 'waiting for its retry',
        'retry-due': 'retry due',
        live: 'held by a live handler',
        'consumer-gone': 'consumer gone',
        unknown: 'unknown',
      };
      out.push(el('h2', {}, `Pending entries of ${g.name}`));
      out.push(
        table(
          ['Id', 'Consumer', 'Idle', 'Deliveries', 'Reclaimable in', 'State', ''],
          pel.entries.map((p: any) => [
            p.id,
            p.consumer,
            age(p.idleMs),
            num(p.deliveries),
            age(p.reclaimableInMs),
            states[p.state] + (p.retryInMs !== null ? ` (${age(Math.abs(p.retryInMs))})` : ''),
            link('View', `#/entry/${enc(key)}/${enc(p.id)}`),
          ]),
          [2, 3, 4],
          `Pending entries of ${g.name}`,
        ),
      );
      out.push(
        after
          ? el(
              'button',
              {
                type: 'button',
                onclick: () => {
                  state.after.delete(g.name);
                  state.last = '';
                  void render();
                },
              },
              'First page',
            )
          : null,
      );
      out.push(
        pel.next
          ? el(
              'button',
              {
                type: 'button',
                'data-focus': `next:${g.name}`,
                onclick: () => {
                  state.after.set(g.name, pel.next);
                  state.last = '';
                  void render();
                },
              },
              'Next page',
            )
          : null,
      );
    }
    out.push(
      el('h2', {}, 'Dead letters'),
      s.deadLetters.length
        ? el('ul', {}, ...s.deadLetters.map((d: any) => el('li', {}, link(d.stream, `#/dead/${enc(d.stream)}`), ` ${num(d.length)}`)))
        : el('p', { class: 'muted' }, 'none'),
    );
    return out;
  }

  async function entryPage(key: string, id: string): Promise<Child[]> {
    const e = await get(`api/entry?key=${enc(key)}&id=${enc(id)}${state.entryFull ? '&full=1' : ''}`);
    const rows = e.fields.map(([f, v]: [string, string]) => {
      let shown = v;
      try {
        shown = JSON.stringify(JSON.parse(v), null, 2);
      } catch {
        // Not JSON: shown as it is.
      }
      return [f, el('pre', {}, shown)];
    });
    return [
      el('h1', { class: 'name' }, `${e.stream} ${e.id}`),
      table(['Field', 'Value (JSON shown decoded)'], rows, [], 'Fields'),
      e.truncated
        ? el(
            'button',
            {
              type: 'button',
              onclick: () => {
                state.entryFull = true;
                state.last = '';
                void render();
              },
            },
            'Show all',
          )
        : null,
    ];
  }

  async function deadList(): Promise<Child[]> {
    const o = await get('api/overview');
    const rows = o.streams.flatMap((s: any) =>
      s.deadLetters.map((d: any) => [link(d.stream, `#/dead/${enc(d.stream)}`), s.stream, num(d.length)]),
    );
    return [
      el('h1', {}, 'Dead letters'),
      rows.length
        ? table(['Dead-letter stream', 'Source', 'Letters'], rows, [2], 'Dead-letter streams')
        : el('p', { class: 'muted' }, 'No dead-letter streams.'),
    ];
  }

  async function deadPage(key: string): Promise<Child[]> {
    const after = state.after.get(`dead:${key}`);
    const d = await get(
      `api/dead-letters?key=${enc(key)}&count=50${after ? `&after=${enc(after)}` : ''}${state.reason ? `&reason=${enc(state.reason)}` : ''}`,
    );
    const ids = d.letters.map((l: any) => l.id);
    const rows = d.letters.map((l: any) => [
      config.actions
        ? el('input', {
            type: 'checkbox',
            'aria-label': `Select ${l.id}`,
            'data-focus': `sel:${l.id}`,
            checked: state.selected.has(l.id),
            onchange: (ev: Event) => {
              if ((ev.target as HTMLInputElement).checked) state.selected.add(l.id);
              else state.selected.delete(l.id);
            },
          })
        : null,
      l.id,
      l.sourceId,
      el('span', { class: 'bad' }, l.error),
      num(l.deliveryCount),
      new Date(l.deadAt).toISOString(),
      `${l.group} / ${l.consumer}`,
      link('View', `#/entry/${enc(key)}/${enc(l.id)}`),
    ]);
    const head = [config.actions ? 'Select' : '', 'Id', 'Source id', 'Reason', 'Deliveries', 'Dead at', 'Group / consumer', ''];
    const actions = config.actions
      ? el(
          'p',
          {},
          el(
            'button',
            {
              type: 'button',
              onclick: () => state.selected.size && void act('api/dead-letters/redrive', { key, ids: [...state.selected] }, 'redrove {n}'),
            },
            'Redrive',
          ),
          el(
            'button',
            {
              type: 'button',
              onclick: () => state.selected.size && void act('api/dead-letters/delete', { key, ids: [...state.selected] }, 'deleted {n}'),
            },
            'Delete',
          ),
          el(
            'button',
            {
              type: 'button',
              onclick: () =>
                confirm(`Redrive all ${d.length} letters of ${key}?`) &&
                void act('api/dead-letters/redrive', { key, ids: 'all' }, 'redrove {n}'),
            },
            'Redrive all',
          ),
          el(
            'button',
            {
              type: 'button',
              onclick: () => {
                ids.forEach((i: string) => state.selected.add(i));
                state.last = '';
                void render();
              },
            },
            'Select all shown',
          ),
        )
      : el('p', { class: 'muted' }, 'Read-only: actions are off.');
    return [
      el('h1', { class: 'name' }, `Dead letters of ${key}`),
      el('p', {}, `${num(d.length)} letters`),
      el(
        'label',
        {},
        'Filter by reason ',
        el('input', {
          type: 'search',
          value: state.reason,
          'data-focus': 'reason',
          oninput: (ev: Event) => {
            state.reason = (ev.target as HTMLInputElement).value;
            state.last = '';
            void render();
          },
        }),
      ),
      actions,
      state.message ? el('p', { role: 'alert' }, state.message) : null,
      table(head, rows, [4], 'Dead letters'),
      d.next && d.letters.length
        ? el(
            'button',
            {
              type: 'button',
              onclick: () => {
                state.after.set(`dead:${key}`, d.next);
                state.last = '';
                void render();
              },
            },
            'Next page',
          )
        : null,
    ];
  }

  let rendering = false;
  async function render(): Promise<void> {
    if (rendering) return;
    rendering = true;
    try {
      const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
      const [page, a, b] = parts;
      const view =
        page === 'stream' && a
          ? await streamPage(a)
          : page === 'entry' && a && b
            ? await entryPage(a, b)
            : page === 'dead' && a
              ? await deadPage(a)
              : page === 'dead'
                ? await deadList()
                : overview(await get('api/overview'));
      const fragment = el('div', {}, ...view);
      // Re-rendered only when something changed, keeping the keyboard focus where it was.
      const html = fragment.innerHTML;
      if (html !== state.last) {
        const focused = (document.activeElement as HTMLElement | null)?.getAttribute('data-focus');
        app.replaceChildren(...fragment.childNodes);
        state.last = html;
        if (focused) (app.querySelector(`[data-focus="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
      }
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
      // Refreshes done, for tests and scripts that wait for the page to have caught up.
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes ?? 0) + 1);
    } catch (err) {
      status.textContent = `refresh failed: ${(err as Error).message}`;
    } finally {
      rendering = false;
    }
  }

  window.addEventListener('hashchange', () => {
    state.last = '';
    state.message = '';
    state.entryFull = false;
    state.selected.clear();
    void render();
  });
  void get('api/config').then((c) => {
    config = c;
    void render();
    setInterval(() => void render(), REFRESH_MS);
  });
}
