/* Every dead-letter stream (#/dead), with its letters. */
import { get } from './api.js';
import { card, el, hash, link, table, type Child } from './dom.js';
import { num } from './format.js';
import { state } from './state.js';

export async function deadListPage(): Promise<Child[]> {
  const d = await get('dead-letter-streams', `?page=${state.page}`);
  const rows = d.streams.map((s) => [link(s.stream, hash('dead', s.stream)), s.length === null ? 'not a stream' : num(s.length)]);
  return [
    el('h1', {}, 'Dead letters'),
    card(
      null,
      table(['Dead-letter stream', 'Letters'], rows, [1], 'Dead-letter streams', 'No dead-letter streams: no entry has been given up on.'),
    ),
  ];
}
