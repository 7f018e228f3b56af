/* One entry's page (#/entry/<key>/<id>): its fields, JSON values shown decoded, each value's size. */
import { get } from './api.js';
import { button, card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { num } from './format.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

export async function entryPage(key: string, id: string): Promise<Child[]> {
  const e = await get('entry', `?key=${encodeURIComponent(key)}&id=${encodeURIComponent(id)}${state.entryFull ? '&full=1' : ''}`);
  const rows = e.fields.map(([f, v], i) => {
    let shown = v;
    try {
      shown = JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      // Not JSON (or cut): shown as it is.
    }
    const size = e.sizes[i]![1];
    return [
      el('span', { class: 'name' }, f),
      el('pre', {}, shown),
      size > v.length ? `${num(size)} bytes, first ${num(v.length)} shown` : `${num(size)} bytes`,
    ];
  });
  const more = e.truncated && !state.entryFull ? button('Show all', 'show-all', () => ((state.entryFull = true), rerender())) : null;
  const wide = e.fieldCount > e.fields.length ? el('p', {}, `First ${e.fields.length} of ${e.fieldCount} fields shown.`) : null;
  const cut = e.truncated && state.entryFull ? el('p', {}, 'Values over 1 MB are cut here; XRANGE reads them whole.') : null;
  return [
    el(
      'p',
      { class: 'small' },
      link('Overview', '#/'),
      ' / ',
      link(e.stream, hash(/[:/]dead(?::\d+)?$/.test(e.stream) ? 'dead' : 'stream', e.stream)),
      ' / entry',
    ),
    el('h1', { class: 'name' }, `${e.stream} `, idCell(e.id)),
    el('p', { class: 'muted' }, 'Added ', when(Number(String(e.id).split('-')[0]))),
    card(null, table(['Field', 'Value (JSON shown decoded)', 'Size'], rows, [2], 'Fields'), wide, more, cut),
  ];
}
