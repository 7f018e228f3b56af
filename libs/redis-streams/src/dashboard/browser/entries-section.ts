/* A stream's entries, newest first, paged; searched by an id range and by a field's value (within a bounded window). */
import { get } from './api.js';
import { button, card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { count, num } from './format.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

/** An entry's fields on one line, each value cut at 80 characters (put in as text, like everything from Redis). */
function preview(fields: [string, string][]): string {
  return fields.map(([f, v]) => `${f}=${v.length > 80 ? `${v.slice(0, 80)}…` : v}`).join('  ');
}

export async function entriesSection(key: string): Promise<Child> {
  const q = state.search;
  const before = state.after.get(`entries:${key}`);
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
  const page = q.field && state.found?.params === asked ? state.found.page : await get('entries', `?${asked}`);
  state.found = q.field ? { params: asked, page } : null;
  const rows = page.entries.map((e) => [
    link(idCell(e.id), hash('entry', key, e.id)),
    when(Number(e.id.split('-')[0])),
    el('span', { class: 'name small' }, preview(e.fields)),
  ]);
  const input = (name: 'from' | 'to' | 'field' | 'value', label: string, hint: string) =>
    el(
      'label',
      {},
      label,
      el('input', { type: 'text', name, value: q[name], placeholder: hint, 'data-focus': `search:${name}`, 'aria-label': label }),
    );
  const search = (ev: Event) => {
    ev.preventDefault();
    const form = new FormData(ev.target as HTMLFormElement);
    for (const name of ['from', 'to', 'field', 'value'] as const) state.search[name] = String(form.get(name) ?? '').trim();
    state.after.delete(`entries:${key}`);
    rerender();
  };
  const clear = (ev: Event) => {
    // The form is kept across refreshes (data-keep): emptied here, and the search with it.
    (ev.target as HTMLElement).closest('form')?.reset();
    Object.assign(state.search, { from: '', to: '', field: '', value: '' });
    state.after.delete(`entries:${key}`);
    rerender();
  };
  const searched = q.field
    ? `${num(page.read)} entries read (at most ${num(page.window)} a page), ${count(page.entries.length, 'match', 'matches')}`
    : '';
  const next = page.next;
  return card(
    'Entries',
    el(
      'form',
      { class: 'form', onsubmit: search, role: 'search', 'aria-label': 'Search entries', 'data-keep': `search:${key}` },
      input('from', 'From id or ms', '1700000000000-0'),
      input('to', 'To id or ms', 'newest'),
      input('field', 'Field', 'data'),
      input('value', 'Contains', 'order-42'),
      el('button', { type: 'submit', class: 'primary', 'data-focus': 'search' }, 'Search'),
      button('Clear', 'search-clear', clear),
    ),
    searched ? el('p', { class: 'small muted' }, searched) : null,
    table(
      ['Id', 'Added', 'Fields (first 200 bytes of each)'],
      rows,
      [],
      'Entries',
      q.field || q.from || q.to ? 'No entry matches in this window.' : 'The stream is empty.',
    ),
    before ? button('Newest', `newest:${key}`, () => (state.after.delete(`entries:${key}`), rerender())) : null,
    next ? button(q.field ? 'Search older' : 'Older', `older:${key}`, () => (state.after.set(`entries:${key}`, next), rerender())) : null,
  );
}
