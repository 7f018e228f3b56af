/* A stream's page (#/stream/<key>[/<group>]): its facts, charts, groups, entries and dead-letter streams. */
import type { Delayed, Idempotency, ScheduleRemoveReply } from './api-replies.js';
import { act, get } from './api.js';
import { chartsSection } from './charts-section.js';
import { button, card, el, hash, idCell, link, table, when, type Child } from './dom.js';
import { delayedSection } from './delayed-section.js';
import { entriesSection } from './entries-section.js';
import { figures } from './figures.js';
import { age, count, num } from './format.js';
import { groupSection } from './group-section.js';
import { headroom } from './headroom.js';
import { rateLimitSection } from './rate-limit-section.js';
import { state } from './state.js';

/** Idempotent produce's counters and window (Redis 8.6), on a stream that had an idempotent write. */
function idempotencyLine(i: Idempotency | null): Child {
  if (!i || (i.iidsAdded === 0 && i.pidsTracked === 0)) return null;
  return el(
    'p',
    {},
    `Idempotent writes: ${num(i.iidsAdded)} added, ${count(i.iidsDuplicates, 'duplicate', 'duplicates')}; ` +
      `window ${num(i.windowSec)} s, ${num(i.maxKeys)} keys per producer; ` +
      `${count(i.iidsTracked, 'key', 'keys')} of ${count(i.pidsTracked, 'producer', 'producers')} tracked`,
  );
}

/** Delayed entries waiting in the stream's schedule (docs/guide/flow-control.md): said when some wait, or when unreadable. */
function delayedLine(d: Delayed): Child {
  if ('error' in d) return el('p', {}, `Delayed entries unknown (${d.error})`);
  const orphaned = d.orphaned ? `; ${count(d.orphaned, 'value', 'values')} without a schedule` : '';
  if (!d.waiting || d.nextDueInMs === null) return orphaned ? el('p', { class: 'delayed' }, `Delayed: none waits${orphaned}`) : null;
  const next = d.nextDueInMs >= 0 ? `next due in ${age(d.nextDueInMs)}` : `next past due by ${age(-d.nextDueInMs)}`;
  return el('p', { class: 'delayed' }, `Delayed: ${count(d.waiting, 'entry waits', 'entries wait')}, ${next}${orphaned}`);
}

/** The stream's repeatable schedules (docs/guide/schedules.md): each with its next and last fire, and Remove when actions are on. */
async function schedulesSection(key: string): Promise<Child> {
  const s = await get('schedules', `?key=${encodeURIComponent(key)}`);
  if (s.total === 0) return null;
  const rows = s.schedules.map((x) => [
    el('span', { class: 'name' }, x.id),
    x.timing,
    x.nextFireAt === null ? '–' : el('span', {}, when(x.nextFireAt), ` (in ${age(Math.max(0, x.nextFireAt - s.now))})`),
    x.lastFireAt === null ? '–' : when(x.lastFireAt),
    x.catchUp ?? '–',
    ...(state.actions
      ? [
          button('Remove', `schedule:${x.id}`, () => {
            if (!confirm(`Remove schedule "${x.id}" of ${key}? Its waiting fire is taken back.`)) return;
            void act<ScheduleRemoveReply>('api/schedules/remove', { key, id: x.id }, (r) =>
              r.removed ? `removed schedule ${x.id}` : `schedule ${x.id} was gone already`,
            );
          }),
        ]
      : []),
  ]);
  const more =
    s.total > s.schedules.length ? ` (the first ${s.schedules.length} of ${num(s.total)}: redis-streams schedules list shows all)` : '';
  return card(
    `Schedules${more}`,
    table(
      ['Schedule', 'Timing', 'Next fire', 'Last fire', 'Catch-up', ...(state.actions ? [''] : [])],
      rows,
      [],
      'Repeatable schedules of this stream',
      'None.',
    ),
  );
}

export async function streamPage(key: string, group?: string): Promise<Child[]> {
  const s = await get('stream', `?key=${encodeURIComponent(key)}`);
  const groups = group === undefined ? s.groups : s.groups.filter((g) => g.name === group);
  const out: Child[] = [
    el('p', { class: 'small' }, link('Overview', '#/'), ' / stream'),
    el('h1', { class: 'name' }, s.stream),
    el(
      'div',
      { class: 'facts' },
      el('span', {}, el('strong', {}, count(s.length, 'entry', 'entries'))),
      el('span', {}, 'last id ', idCell(s.lastGeneratedId)),
      el('span', {}, count(s.groups.length, 'group', 'groups')),
      group !== undefined ? el('span', {}, `group ${group} only · `, link('all groups', hash('stream', key))) : null,
    ),
    headroom(s),
    idempotencyLine(s.idempotency),
    delayedLine(s.delayed),
    state.message ? el('p', { role: 'alert', class: 'notice' }, state.message) : null,
    chartsSection(`stream:${key}`, { ...figures([s]), producedBefore: s.producedHistory.slice(0, -1) }, s.history),
  ];
  for (const g of groups) out.push(await rateLimitSection(key, g.name), ...(await groupSection(key, g)));
  if (group !== undefined && groups.length === 0)
    out.push(el('p', { role: 'alert', class: 'notice' }, `No group "${group}" on this stream.`));
  out.push(await delayedSection(key, s.delayed));
  out.push(await schedulesSection(key));
  out.push(await entriesSection(key));
  const deadRows = s.deadLetters.map((d) => [link(d.stream, hash('dead', d.stream)), d.length === null ? 'not a stream' : num(d.length)]);
  out.push(
    card(
      'Dead letters',
      table(
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
