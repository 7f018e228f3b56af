/* One entry's page (#/entry/<key>/<id>): where it stands in each group, its history as far as Redis tells,
 * its dead letters, the moves on it, and its fields (JSON values shown decoded, each value's size). */
import type { EntryGroupRow, EntryLetterRow, EntryReply, EntryStateReply, RedriveReply } from './api-replies.js';
import { act, get } from './api.js';
import { button, card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { age, count, named, num } from './format.js';
import { pendingActions } from './pending-actions.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

const isDeadStream = (key: string) => /[:/]dead(?::\d+)?$/.test(key);

/** The fields last read (an entry's fields never change: read again only when another entry, or all of it, is asked). */
let fieldsRead: { asked: string; entry: EntryReply | null } | null = null;

async function fieldsOf(key: string, id: string): Promise<EntryReply | null> {
  const asked = `?key=${encodeURIComponent(key)}&id=${encodeURIComponent(id)}${state.entryFull ? '&full=1' : ''}`;
  if (fieldsRead?.asked !== asked) {
    const entry = await get('entry', asked).catch((err: Error) => {
      // Gone from its stream (trimmed, deleted, acked with deleteOnAck): its state still says what Redis knows.
      if (err.message === 'no such stream or entry') return null;
      throw err;
    });
    fieldsRead = { asked, entry };
  }
  return fieldsRead.entry;
}

/** The group's state in words: what it waits for, as far as Redis tells. */
function stateWords(g: EntryGroupRow, s: EntryStateReply): Child {
  switch (g.state) {
    case 'unread':
      return `in the stream, not yet read (the group's cursor is at ${g.lastDeliveredId})`;
    case 'pending':
      return `pending under ${g.pending!.owner}`;
    case 'retry-waiting':
      return el('span', {}, 'waiting for a retry until ', when(g.retry!.dueAt), ` (in ${age(g.retry!.inMs)})`);
    case 'retry-due':
      return `retry due ${age(-g.retry!.inMs)} ago: the next worker that beats takes it`;
    case 'dead-lettered':
      return 'dead-lettered';
    case 'acked':
      return s.inStream
        ? 'acked, or taken off the pending list by hand (read by the group, no longer pending: Redis keeps nothing that tells the two apart)'
        : 'acked or deleted (read by the group, no longer pending, gone from the stream)';
    case 'not-pending':
      return `no longer pending: acked, or dead-lettered past the ${s.letterSearch && 'read' in s.letterSearch ? s.letterSearch.read.toLocaleString('en-US') : ''} letters searched (its letter may lie further on)`;
  }
}

/** The history of the entry in one group, as far as Redis tells: deliveries, its retry, its letters. */
function historyLines(id: string, g: EntryGroupRow, letters: EntryLetterRow[]): Child[] {
  const lines: Child[] = [];
  if (g.pending) {
    const p = g.pending;
    const connected = p.ownerConnected === null ? '' : p.ownerConnected ? ' (connected)' : ' (no connection)';
    lines.push(
      `Delivered ${count(p.deliveries, 'time', 'times')}, last to ${p.owner}${connected}, ${age(p.idleMs)} ago (or its lease renewed then).`,
    );
  } else if (g.state === 'unread') lines.push(`Not yet delivered: ${id} is past the group's cursor.`);
  if (g.retry) lines.push(el('span', {}, `Its retry is due `, when(g.retry.dueAt), '.'));
  if (g.retryUnknown) lines.push(`Its retry record could not be read (${g.retryUnknown}).`);
  for (const l of letters.filter((x) => x.group === g.group))
    lines.push(
      el(
        'span',
        {},
        'Dead-lettered ',
        when(l.deadAt),
        ` by ${l.consumer} after ${count(l.deliveryCount, 'delivery', 'deliveries')}: ${l.error}${l.errorTruncated ? ' …' : ''}`,
      ),
    );
  if (g.state === 'acked') lines.push(`Read by the group (its cursor is at ${g.lastDeliveredId}) and no longer pending.`);
  return lines;
}

function stateCard(key: string, id: string, s: EntryStateReply): HTMLElement {
  const rows = s.groups.map((g) => [
    el('span', { class: 'name' }, g.group),
    el('span', { 'data-state': g.state }, stateWords(g, s)),
    g.pending ? el('span', { class: 'name' }, g.pending.owner) : '–',
    g.pending ? num(g.pending.deliveries) : '–',
    g.pending ? age(g.pending.idleMs) : '–',
    g.pending
      ? pendingActions(key, g.group, {
          id,
          consumer: g.pending.owner,
          idleMs: g.pending.idleMs,
          deliveries: g.pending.deliveries,
          reclaimableInMs: 0,
          state: g.state,
          retryInMs: g.retry?.inMs ?? null,
        })
      : null,
  ]);
  return card(
    'State',
    s.inStream ? null : el('p', { class: 'notice' }, 'Not in the stream: trimmed, deleted, or acked with deleteOnAck.'),
    table(['Group', 'State', 'Owner', 'Deliveries', 'Idle', ''], rows, [3, 4], 'State in each group', 'The stream has no group.'),
  );
}

function historyCard(id: string, s: EntryStateReply): HTMLElement {
  const items: Child[] = [el('li', {}, 'Added ', when(Number(id.split('-')[0])), '.')];
  for (const g of s.groups)
    for (const line of historyLines(id, g, s.letters)) items.push(el('li', {}, el('span', { class: 'name' }, `${g.group}: `), line));
  const search = s.letterSearch;
  const note =
    'error' in search
      ? `Its dead letters could not be searched (${search.error}).`
      : search.complete
        ? null
        : `Its dead letters were searched among the first ${num(search.read)} letters written after it; a later one is not shown.`;
  return card('History', el('ul', { 'aria-label': 'History' }, ...items), note ? el('p', { class: 'muted' }, note) : null);
}

function letterCard(key: string, l: EntryLetterRow): HTMLElement {
  const redrive = () => {
    if (
      !confirm(
        `Redrive letter ${l.id} of ${named(l.deadStream)}?\n\nIts fields go back to ${named(key)} as a new entry (its handler runs it again) and the letter leaves the dead-letter stream.`,
      )
    )
      return;
    void act<RedriveReply>('api/dead-letters/redrive', { key: l.deadStream, ids: [l.id] }, (r) => {
      const newId = r.results[0]?.newId;
      return newId ? `redriven as ${newId}` : `letter ${l.id} was not redriven`;
    });
  };
  return card(
    `Dead letter ${l.id}`,
    el(
      'p',
      {},
      link(l.deadStream, hash('dead', l.deadStream)),
      ' · ',
      link('the letter', hash('entry', l.deadStream, l.id)),
      ' · dead-lettered ',
      when(l.deadAt),
      ` from group ${l.group} by ${l.consumer} after ${count(l.deliveryCount, 'delivery', 'deliveries')}`,
    ),
    el('p', { class: 'bad name', 'aria-label': 'Reason' }, l.error + (l.errorTruncated ? ' …' : '')),
    l.stack
      ? el(
          'details',
          { open: true },
          el('summary', {}, 'Stack'),
          el('pre', { 'aria-label': 'Stack' }, l.stack + (l.stackTruncated ? '\n…' : '')),
        )
      : el('p', { class: 'muted' }, 'No stack (no handler failed: dead-lettered by hand, or for its size or its decoding).'),
    state.actions ? el('p', {}, button('Redrive', `redrive:${l.id}`, redrive, 'primary', `Redrive letter ${l.id}`)) : null,
  );
}

function fieldsCard(e: EntryReply): HTMLElement {
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
  return card(null, table(['Field', 'Value (JSON shown decoded)', 'Size'], rows, [2], 'Fields'), wide, more, cut);
}

export async function entryPage(key: string, id: string): Promise<Child[]> {
  const dead = isDeadStream(key);
  const e = await fieldsOf(key, id);
  // A letter's own page shows its fields; an entry of a stream with groups shows where it stands too.
  const s = dead ? null : await get('entry-state', `?key=${encodeURIComponent(key)}&id=${encodeURIComponent(id)}`);
  if (!e && !s) throw new Error('no such stream or entry');
  return [
    el('p', { class: 'small' }, link('Overview', '#/'), ' / ', link(key, hash(dead ? 'dead' : 'stream', key)), ' / entry'),
    el('h1', { class: 'name' }, `${key} `, idCell(id)),
    el('p', { class: 'muted' }, 'Added ', when(Number(String(id).split('-')[0]))),
    state.message ? el('p', { role: 'alert', class: 'notice' }, state.message) : null,
    s ? stateCard(key, id, s) : null,
    ...(s ? s.letters.map((l) => letterCard(key, l)) : []),
    s ? historyCard(id, s) : null,
    e ? fieldsCard(e) : null,
  ];
}
