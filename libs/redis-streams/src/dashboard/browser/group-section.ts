/* One group on the stream page: its state, pause, figures, ordering, consumers and a page of its pending entries. */
import type { ConsumerRow, GroupRow } from './api-replies.js';
import { act, get } from './api.js';
import { button, chip, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { age, idAge, num } from './format.js';
import { groupState } from './group-state.js';
import { durabilityLabel, pelStateLabel } from './labels.js';
import { pager } from './pager.js';
import { pendingActions } from './pending-actions.js';
import { state } from './state.js';

export async function groupSection(key: string, g: GroupRow): Promise<Child[]> {
  const retries = g.retries;
  const connected = (c: ConsumerRow) => (c.connected === null ? 'unknown' : c.connected ? '● yes' : '✖ no');
  const consumers = g.consumers.map((c) => [
    el('span', { class: 'name' }, c.name),
    num(c.pending),
    age(c.idleMs),
    c.inactiveMs === null ? 'n/a' : age(c.inactiveMs),
    connected(c),
    // Its oldest pending entry's age from its id (an explicit id such as 1-1 is no time), and its idle time.
    c.oldestPendingId ? age(idAge(c.oldestPendingId)) : '–',
    age(c.oldestPendingIdleMs),
  ]);
  const after = state.after.get(`pel:${g.name}`);
  const pel = await get(
    'pending',
    `?key=${encodeURIComponent(key)}&group=${encodeURIComponent(g.name)}&count=50${after ? `&after=${after}` : ''}`,
  );
  const rows = pel.entries.map((p) => [
    link(idCell(p.id), hash('entry', key, p.id)),
    el('span', { class: 'name' }, p.consumer),
    age(p.idleMs),
    num(p.deliveries),
    age(p.reclaimableInMs),
    pelStateLabel(p.state) + (p.retryInMs !== null ? ` (${age(Math.abs(p.retryInMs))})` : ''),
    pendingActions(key, g.name, p),
  ]);
  const retry =
    'error' in retries ? `retry set unknown (${retries.error})` : `${num(retries.waiting)} waiting for a retry, ${num(retries.due)} due`;
  const o = g.ordering;
  const ordered = !o
    ? null
    : el(
        'p',
        {},
        o.consumer === null
          ? `Ordered: no owner now; ${num(o.members)} member(s) share the partitions`
          : `Ordered: owned by ${o.consumer} (epoch ${o.epoch}, lease ${age(o.leaseMs)} left); ${num(o.members)} member(s) share the partitions`,
        o.durability
          ? el(
              'span',
              { class: o.durability.state === 'held' || o.durability.state === 'degraded' ? 'notice' : '' },
              durabilityLabel(o.durability),
            )
          : '',
      );
  const p = g.paused;
  const pausedLine = p
    ? el(
        'p',
        { class: 'notice paused' },
        `Paused`,
        p.at ? ' since ' : '',
        p.at ? when(p.at) : '',
        `${p.by ? ` by ${p.by}` : ''}: nothing new is read`,
      )
    : null;
  // Anyone who may act sees the button; a read-only dashboard shows the state alone.
  const toggle = !state.actions
    ? null
    : p
      ? button('Resume', `resume:${g.name}`, () => void act('api/resume', { key, group: g.name }, () => `resumed ${g.name}`), 'primary')
      : button('Pause', `pause:${g.name}`, () => void act('api/pause', { key, group: g.name }, () => `paused ${g.name}`));
  return [
    el(
      'section',
      { class: 'card', id: `group-${g.name}`, 'aria-label': `Group ${g.name}` },
      el('h2', {}, `Group ${g.name} `, chip(groupState(g, state.minIdleMs))),
      pausedLine,
      toggle,
      el(
        'div',
        { class: 'facts' },
        el('span', {}, 'lag ', el('strong', {}, num(g.lag)), ` (${age(g.lagMs)})`),
        el('span', {}, 'pending ', el('strong', {}, num(g.pending))),
        el('span', {}, 'last delivered ', idCell(g.lastDeliveredId)),
        el('span', {}, retry),
      ),
      ordered,
      el('h3', {}, 'Consumers'),
      table(
        ['Consumer', 'Pending', 'Idle', 'Inactive', 'Connected', 'Oldest pending age', 'Oldest pending idle'],
        consumers,
        [1, 2, 3, 5, 6],
        `Consumers of ${g.name}`,
        'No consumer has read from this group yet.',
      ),
      el('h3', {}, `Pending entries of ${g.name}`),
      table(
        ['Id', 'Consumer', 'Idle', 'Deliveries', 'Reclaimable in', 'State', state.actions ? 'Actions' : ''],
        rows,
        [2, 3, 4],
        `Pending entries of ${g.name}`,
        'Nothing pending: every delivered entry was acknowledged.',
      ),
      ...pager(`pel:${g.name}`, pel.next),
    ),
  ];
}
