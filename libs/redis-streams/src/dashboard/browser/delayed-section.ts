/* A stream's delayed entries (docs/guide/flow-control.md), earliest due first, paged: each with its due time, a
 * preview of its fields, and cancel and promote. */
import type { Delayed } from './api-replies.js';
import { get } from './api.js';
import { card, el, hash, link, table, when, type Child } from './dom.js';
import { age, num, size } from './format.js';
import { delayedActions } from './delayed-actions.js';
import { pager } from './pager.js';
import { state } from './state.js';

/** Its fields on one line, each value cut at 80 characters. */
function preview(fields: string[] | null, bytes: number): string {
  if (fields === null) return bytes < 0 ? 'unreadable' : `${size(bytes)}, not shown (past this page's budget of 1 MB)`;
  const pairs: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const v = fields[i + 1]!;
    pairs.push(`${fields[i]}=${v.length > 80 ? `${v.slice(0, 80)}…` : v}`);
  }
  return pairs.join('  ');
}

export async function delayedSection(key: string, delayed: Delayed): Promise<Child> {
  if ('error' in delayed || !delayed.waiting) return null;
  const paging = `delayed:${key}`;
  // The page's cursor: "<due ms> <id>" of the row it went on after.
  const after = state.after.get(paging);
  const at = after ? after.indexOf(' ') : -1;
  const q = new URLSearchParams({ key, count: '20' });
  if (after && at > 0) {
    q.set('afterDue', after.slice(0, at));
    q.set('after', after.slice(at + 1));
  }
  const d = await get('delayed', `?${q.toString()}`);
  const rows = d.entries.map((e) => [
    link(el('span', { class: 'id' }, e.id), hash('delayed', key, e.id)),
    el('span', {}, when(e.dueAt), e.dueAt > d.now ? ` (in ${age(e.dueAt - d.now)})` : ` (past due by ${age(d.now - e.dueAt)})`),
    el('span', { class: 'name small' }, preview(e.fields, e.bytes)),
    `${num(Math.max(0, e.bytes))} bytes`,
    delayedActions(key, e.id),
  ]);
  return card(
    `Delayed entries (${num(d.waiting)})`,
    table(['Id', 'Due', 'Fields', 'Size', ''], rows, [3], 'Delayed entries', 'None waits.'),
    ...pager(paging, d.next ? `${d.next.dueAt} ${d.next.id}` : null),
  );
}
