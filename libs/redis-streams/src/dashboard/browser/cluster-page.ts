/* The cluster page (#/cluster): which master serves which streams and partitions (this overview page's streams). */
import { get } from './api.js';
import { card, el, hash, link, table, type Child } from './dom.js';
import { num } from './format.js';
import { state } from './state.js';

export async function clusterPage(): Promise<Child[]> {
  const o = await get('overview', `?page=${state.page}`);
  const byNode = new Map<string, string[]>();
  for (const s of o.streams) if (s.node !== null) byNode.set(s.node, [...(byNode.get(s.node) ?? []), s.stream]);
  if (byNode.size === 0)
    return [
      el('h1', {}, 'Cluster'),
      el('p', { class: 'empty' }, 'One node: not a cluster. Start the dashboard with --cluster to see which master serves which streams.'),
    ];
  const rows = [...byNode]
    .sort()
    .map(([node, streams]) => [
      node,
      num(streams.length),
      el('ul', {}, ...streams.map((name) => el('li', { class: 'name' }, link(name, hash('stream', name))))),
    ]);
  return [
    el('h1', {}, 'Cluster'),
    card(null, table(['Master', 'Streams', 'Streams and partitions it serves'], rows, [1], 'Masters')),
    el('p', {}, `The streams of overview page ${o.page + 1}.`),
  ];
}
