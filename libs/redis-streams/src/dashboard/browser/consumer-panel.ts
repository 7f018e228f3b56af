/* The transport running beside the dashboard (in-app only): its state and, per stream, what it holds. */
import type { ConsumerHealth, ConsumerReply } from './api-replies.js';
import { get } from './api.js';
import { card, el, table, type Child } from './dom.js';
import { age, num } from './format.js';
import { leaseWords } from './labels.js';
import { state } from './state.js';

export async function consumerPanel(): Promise<Child[]> {
  if (!state.consumer) return [];
  // Its own failure (health() throwing or hanging) shows here; the streams still render.
  const reply: ConsumerReply = await get('consumer').catch((err: Error) => ({ error: err.message }));
  const body: Child[] = [];
  if (!('health' in reply) || !reply.health)
    body.push(el('p', { class: 'bad' }, `Its health could not be read: ${('error' in reply ? reply.error : undefined) ?? 'no answer'}`));
  else {
    const h = reply.health;
    const down = h.redisDownForMs > 0 ? `, Redis unreachable for ${age(h.redisDownForMs)}` : '';
    const streams = Array.isArray(h.streams) ? h.streams : [];
    // An ordered stream: whether this app owns it now, and how many keys wait behind a failed entry.
    const ordered = (s: ConsumerHealth['streams'][number]) =>
      !s.ordering ? '–' : `${leaseWords(s.ordering, h.consumer)}, ${num(s.ordering.blockedKeyCount)} key(s) blocked`;
    const rows = streams.map((s) => [s.stream, num(s.lag), num(s.pending), num(s.inHand), age(s.lastBeatAgeMs), ordered(s)]);
    const blocked = streams.flatMap((s) =>
      (s.ordering?.blockedKeys ?? []).map((k) => [s.stream, k.key, k.id, num(k.waiting), age(k.forMs)]),
    );
    body.push(
      el('p', {}, `${h.consumer} in group ${h.group}: ${h.state}${down}${h.loopError ? `; Redis refuses: ${h.loopError}` : ''}`),
      table(
        ['Stream', 'Lag', 'Pending', 'In hand', 'Last beat', 'Ordered'],
        rows,
        [1, 2, 3, 4],
        "This app's streams",
        'It reads no stream yet.',
      ),
      blocked.length === 0
        ? null
        : table(['Stream', 'Key', 'Failed entry', 'Waiting behind it', 'For'], blocked, [3, 4], 'Keys waiting behind a failed entry'),
    );
  }
  return [card("This app's consumer", ...body)];
}
