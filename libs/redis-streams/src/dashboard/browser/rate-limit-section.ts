/* A group's rate limit on a stream's page: the limit its workers run, the window's use, the block, the keys held back. */
import { get } from './api.js';
import { card, el, table, type Child } from './dom.js';
import { age, count, num } from './format.js';

/** A held key as its keyrate keys name it, made readable: `%3A` back to `:`; a long key is only its hash. */
function heldKeyLabel(key: string): string {
  if (key.startsWith('%#')) return `(hashed) ${key.slice(2)}`;
  return key.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** The group's rate limit, or nothing when none of its workers publishes one. */
export async function rateLimitSection(key: string, group: string): Promise<Child> {
  let limit;
  try {
    ({ limit } = await get('rate-limit', `?key=${encodeURIComponent(key)}&group=${encodeURIComponent(group)}`));
  } catch (err) {
    // A dashboard user without rights on the rate keys still sees the rest of the page, and why this is missing.
    return el('p', { class: 'notice', 'data-rate': 'unknown' }, `Rate limit of group ${group} unknown (${(err as Error).message})`);
  }
  if (!limit) return null;
  const s = limit.state;
  // The period as configured (`perMs`), not rounded: 60000 is `60 s`, 1500 `1500 ms`.
  const per = `${num(s.max)} per ${s.perMs % 1000 === 0 ? `${num(s.perMs / 1000)} s` : `${num(s.perMs)} ms`}`;
  const title = `Rate limit of group ${group}: ${per}${s.perKey ? ' per key' : ''}`;
  const blocked =
    s.blockedForMs > 0
      ? el(
          'p',
          { class: 'notice', 'data-rate': 'blocked' },
          `Blocked for ${age(s.blockedForMs)} more${s.blockedBy ? ` (by ${s.blockedBy})` : ''}`,
        )
      : null;
  const facts = el(
    'div',
    { class: 'facts' },
    el('span', {}, `pattern ${limit.name}`),
    s.perKey
      ? el('span', { 'data-rate': 'held' }, `${count(s.heldCount, 'key', 'keys')} held back now`)
      : el('span', { 'data-rate': 'window' }, `window ${num(s.windowUsed)} / ${num(s.max)} used`),
  );
  if (!s.perKey) return card(title, facts, blocked);
  const more = s.heldCount > s.held.length ? `the ${s.held.length} held longest of ${num(s.heldCount)}` : 'Keys held back';
  return card(
    title,
    facts,
    blocked,
    table(
      ['Key', 'Held for'],
      s.held.map((h) => [el('span', { class: 'name' }, heldKeyLabel(h.key)), age(h.forMs)]),
      [1],
      more,
      'No key is held back now.',
    ),
  );
}
