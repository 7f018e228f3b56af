/* A dead-letter stream's letters (#/dead/<key>): filtered by reason, selected, redriven or deleted (with an undo time). */
import type { DeleteReply, LetterRow, RedriveReply } from './api-replies.js';
import { act, get } from './api.js';
import { button, card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { count, named, num } from './format.js';
import { pager } from './pager.js';
import { rerender } from './rerender.js';
import { state } from './state.js';
import { later } from './undo.js';

function deadActions(key: string, ids: string[], total: number): HTMLElement {
  if (!state.actions) return el('p', { class: 'muted' }, 'Read-only: actions are off.');
  const chosen = () => [...state.selected];
  const moved = (reply: RedriveReply) =>
    `redrove ${reply.results.filter((r) => r.newId).length}${reply.remaining ? `, ${reply.remaining} left` : ''}`;
  const redrive = () => {
    const n = state.selected.size;
    if (
      n &&
      confirm(
        `Redrive ${count(n, 'letter', 'letters')} of ${named(key)}?\n\nEach goes back to its stream as a new entry (its handler runs it again) and leaves the dead-letter stream.`,
      )
    )
      void act('api/dead-letters/redrive', { key, ids: chosen() }, moved);
  };
  const remove = () => {
    const ids = chosen();
    if (
      !ids.length ||
      !confirm(
        `Delete ${count(ids.length, 'letter', 'letters')} of ${named(key)}?\n\nThey are removed from Redis for good after 5 seconds, unless you press Undo.`,
      )
    )
      return;
    state.selected.clear();
    later(
      `Deleting ${count(ids.length, 'letter', 'letters')} in 5 s`,
      5000,
      () => void act('api/dead-letters/delete', { key, ids }, (r: DeleteReply) => `deleted ${r.deleted.length}`),
    );
    rerender();
  };
  return el(
    'p',
    {},
    button('Redrive', 'redrive', redrive, 'primary'),
    button('Delete', 'delete', remove, 'danger'),
    button(
      'Redrive all',
      'redrive-all',
      () =>
        confirm(
          `Redrive the oldest ${num(Math.min(total, 1000))} letters of ${named(key)}?\n\nEach goes back to its stream as a new entry.`,
        ) && void act('api/dead-letters/redrive', { key, ids: 'all' }, moved),
    ),
    button('Select all shown', 'select-all', () => (ids.forEach((i) => state.selected.add(i)), rerender())),
  );
}

function letterRow(key: string, l: LetterRow): Child[] {
  const toggle = (ev: Event) => {
    if ((ev.target as HTMLInputElement).checked) state.selected.add(l.id);
    else state.selected.delete(l.id);
  };
  const reason = el(
    'div',
    { class: 'name reason' },
    el('span', { class: 'bad' }, l.error + (l.errorTruncated ? ' …' : '')),
    l.stack
      ? el(
          'details',
          {},
          el('summary', {}, 'Stack'),
          el('pre', {}, l.stack.split('\n').map(named).join('\n') + (l.stackTruncated ? '\n…' : '')),
        )
      : null,
  );
  return [
    ...(state.actions
      ? [
          el('input', {
            type: 'checkbox',
            'aria-label': `Select ${l.id}`,
            'data-focus': `sel:${l.id}`,
            checked: state.selected.has(l.id),
            onchange: toggle,
          }),
        ]
      : []),
    idCell(l.id),
    link(l.stream, hash('stream', l.stream)),
    link(idCell(l.sourceId), hash('entry', l.stream, l.sourceId)),
    reason,
    num(l.deliveryCount),
    when(l.deadAt),
    el('span', { class: 'name' }, `${l.group} / ${l.consumer}`),
    el('span', { class: 'nowrap' }, `${num(l.fieldsBytes)} bytes`),
    link('View', hash('entry', key, l.id)),
  ];
}

export async function deadPage(key: string): Promise<Child[]> {
  const after = state.after.get(`dead:${key}`);
  const q = `key=${encodeURIComponent(key)}&count=50${after ? `&after=${after}` : ''}${state.reason ? `&reason=${encodeURIComponent(state.reason)}` : ''}`;
  const d = await get('dead-letters', `?${q}`);
  const head = [
    ...(state.actions ? ['Select'] : []),
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
    state.reason = (ev.target as HTMLInputElement).value;
    rerender();
  };
  return [
    el('p', { class: 'small' }, link('Dead letters', '#/dead'), ' / stream'),
    el('h1', { class: 'name' }, `Dead letters of ${key}`),
    el('p', {}, count(d.length, 'letter', 'letters')),
    el(
      'p',
      { class: 'form' },
      el(
        'label',
        {},
        'Filter by reason (this page)',
        el('input', { type: 'search', value: state.reason, 'data-focus': 'reason', oninput: filter }),
      ),
    ),
    deadActions(
      key,
      d.letters.map((l) => l.id),
      d.length,
    ),
    state.message ? el('p', { role: 'alert', class: 'notice' }, state.message) : null,
    card(
      null,
      table(
        head,
        d.letters.map((l) => letterRow(key, l)),
        [head.indexOf('Deliveries')],
        'Dead letters',
        d.length ? 'No letter on this page matches the filter.' : 'No dead letters here.',
      ),
      ...pager(`dead:${key}`, d.next),
    ),
  ];
}
