/* One delayed entry's page (#/delayed/<key>/<id>): when it is due, its fields, cancel and promote. */
import { get } from './api.js';
import { card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { age, num, size } from './format.js';
import { delayedActions } from './delayed-actions.js';
import { state } from './state.js';

export async function delayedEntryPage(key: string, id: string): Promise<Child[]> {
  const e = await get('delayed-entry', `?key=${encodeURIComponent(key)}&id=${encodeURIComponent(id)}`).catch((err: Error) => {
    if (err.message === 'no such stream or entry') return null;
    throw err;
  });
  const head: Child[] = [
    el('p', { class: 'small' }, link('Overview', '#/'), ' / ', link(key, hash('stream', key)), ' / delayed entry'),
    el('h1', { class: 'name' }, `${key} `, el('span', { class: 'id' }, id)),
    state.message ? el('p', { role: 'alert', class: 'notice' }, state.message) : null,
  ];
  const moved = state.promoted?.id === id ? state.promoted.newId : null;
  if (!e)
    return [
      ...head,
      card(
        'State',
        el('p', { 'data-state': 'gone' }, 'No longer delayed: moved into the stream (due, or promoted), or cancelled.'),
        moved ? el('p', {}, 'You promoted it: in the stream as ', link(idCell(moved), hash('entry', key, moved))) : null,
      ),
    ];
  const rows: Child[][] = [];
  const fields = e.fields ?? [];
  for (let i = 0; i + 1 < fields.length; i += 2) rows.push([el('span', { class: 'name' }, fields[i]), el('pre', {}, fields[i + 1])]);
  const due =
    e.dueAt > e.now ? ` (in ${age(e.dueAt - e.now)})` : ` (past due by ${age(e.now - e.dueAt)}: no worker of the stream has moved it in)`;
  return [
    ...head,
    card(
      'State',
      el('p', { 'data-state': 'delayed' }, 'Delayed until ', when(e.dueAt), due, '. It is not in the stream yet: no group has seen it.'),
      e.idempotencyKey === null ? null : el('p', {}, `Idempotency key: ${e.idempotencyKey}`),
      el('p', {}, delayedActions(key, id)),
    ),
    card(
      null,
      table(
        ['Field', 'Value (cut at 2,000 bytes)'],
        rows,
        [],
        'Fields',
        e.fields === null
          ? e.bytes > 0
            ? `${size(e.bytes)}, not shown: past the 1 MB a view reads.`
            : 'Its record could not be read.'
          : 'No fields.',
      ),
      el(
        'p',
        { class: 'muted' },
        `Its record: ${num(e.bytes)} bytes${e.parts !== null && e.parts > fields.length ? `, first ${fields.length / 2} of ${e.parts / 2} fields shown` : ''}.`,
      ),
    ),
  ];
}
