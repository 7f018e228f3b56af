/* Building the page: elements, links, buttons, tables, cards and chips. Everything from Redis goes in
 * as text (textContent, never HTML). */

export type Child = Node | string | number | null | undefined | false;

export function el(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false || v === null) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'checked') (e as HTMLInputElement).checked = Boolean(v);
    else if (k === 'value') (e as HTMLInputElement).value = String(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(typeof c === 'object' ? c : String(c));
  return e;
}

export function link(text: Child, hash: string, focus?: string): HTMLElement {
  return el('a', { href: hash, 'data-focus': focus }, text);
}

/** The hash of a page: each part encoded (a name may hold `/`, `#` or anything else). */
export function hash(...parts: string[]): string {
  return `#/${parts.map(encodeURIComponent).join('/')}`;
}

export function button(name: string, focus: string, action: (ev: Event) => void, cls?: string, label?: string): HTMLElement {
  return el('button', { type: 'button', 'data-focus': focus, onclick: action, class: cls, 'aria-label': label }, name);
}

/** A moment in local time, its UTC form on hover (and in `datetime`); a value that is no date shown as it is. */
export function when(ms: number): Child {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  const local = d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return el('time', { datetime: d.toISOString(), title: `${d.toISOString()} (UTC)` }, local);
}

/** An entry id: never wrapped, its time on hover. */
export function idCell(value: string): HTMLElement {
  const ms = Number(value.split('-')[0]);
  const d = new Date(ms);
  const title = Number.isNaN(d.getTime()) || ms < 946684800000 ? undefined : `${d.toLocaleString()} · ${d.toISOString()} (UTC)`;
  return el('span', { class: 'id', title }, value);
}

/**
 * A table that scrolls inside itself on a narrow screen. `numeric`: the indexes of right-aligned
 * columns, counted on `head` as given (a select column included).
 */
export function table(head: string[], rows: Child[][], numeric: number[], label: string, empty?: string): HTMLElement {
  if (rows.length === 0 && empty) return el('p', { class: 'empty' }, empty);
  const cls = (i: number) => (numeric.includes(i) ? 'n' : undefined);
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      // Roles said: a phone's CSS shows rows as blocks, which would take the table's semantics with them.
      { 'aria-label': label, role: 'table' },
      el('thead', {}, el('tr', {}, ...head.map((h, i) => el('th', { class: cls(i), scope: 'col', role: 'columnheader' }, h)))),
      el(
        'tbody',
        {},
        ...rows.map((r) =>
          el(
            'tr',
            { role: 'row' },
            // Its column's name on each cell: a phone shows each row as a card of named lines (APP_CSS).
            ...r.map((c, i) =>
              el(
                'td',
                {
                  class: [cls(i), c === '' ? 'blank' : undefined].filter(Boolean).join(' ') || undefined,
                  role: 'cell',
                  'data-label': head[i] || undefined,
                },
                c,
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

export function card(title: Child, ...children: Child[]): HTMLElement {
  return el(
    'section',
    { class: 'card', 'aria-label': typeof title === 'string' ? title : undefined },
    title ? el('h2', {}, title) : null,
    ...children,
  );
}

export type Health = 'healthy' | 'attention' | 'failing';

/** A state said three ways: a word, a shape and a colour. */
export function chip(state: Health, text?: string): HTMLElement {
  const mark = { healthy: '●', attention: '▲', failing: '✖' }[state];
  const word = { healthy: 'Healthy', attention: 'Attention', failing: 'Failing' }[state];
  return el('span', { class: `chip ${state}` }, `${mark} ${text ?? word}`);
}
