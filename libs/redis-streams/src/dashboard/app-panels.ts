/* The dashboard's browser code, part 4 of 5: panels beside the pages (this app's consumer, the
 * cluster's masters, a stream's trim headroom). Sent as source with the other parts (app-script.ts);
 * reaches them through `ui` only. */
import type { AppState, Child, Dom } from './app-dom.js';

/** Made by the served script (app-script.ts), not by this module. */
declare const ui: Dom & { state: AppState };

/** The transport running beside the dashboard (in-app only): its state and, per stream, what it holds. */
async function consumerPanel(): Promise<Child[]> {
  if (!ui.state.consumer) return [];
  // Its own failure (health() throwing or hanging) shows here; the streams still render.
  const reply = await ui.get('api/consumer').catch((err: Error) => ({ error: err.message }));
  const h = reply.health;
  const body: Child[] = [];
  if (!h) body.push(ui.el('p', { class: 'bad' }, `Its health could not be read: ${reply.error ?? 'no answer'}`));
  else {
    const down = h.redisDownForMs > 0 ? `, Redis unreachable for ${ui.age(h.redisDownForMs)}` : '';
    const streams = Array.isArray(h.streams) ? h.streams : [];
    // An ordered stream: whether this app owns it now, and how many keys wait behind a failed entry.
    const ordered = (s: any) =>
      !s.ordering
        ? '–'
        : `${s.ordering.owned ? 'owned here' : `standby (${s.ordering.owner || 'no owner'})`}, ${ui.num(s.ordering.blockedKeyCount)} key(s) blocked`;
    const rows = streams.map((s: any) => [
      s.stream,
      ui.num(s.lag),
      ui.num(s.pending),
      ui.num(s.inHand),
      ui.age(s.lastBeatAgeMs),
      ordered(s),
    ]);
    const blocked = streams.flatMap((s: any) =>
      (s.ordering?.blockedKeys ?? []).map((k: any) => [s.stream, k.key, k.id, ui.num(k.waiting), ui.age(k.forMs)]),
    );
    body.push(
      ui.el('p', {}, `${h.consumer} in group ${h.group}: ${h.state}${down}${h.loopError ? `; Redis refuses: ${h.loopError}` : ''}`),
      ui.table(
        ['Stream', 'Lag', 'Pending', 'In hand', 'Last beat', 'Ordered'],
        rows,
        [1, 2, 3, 4],
        "This app's streams",
        'It reads no stream yet.',
      ),
      blocked.length === 0
        ? null
        : ui.table(['Stream', 'Key', 'Failed entry', 'Waiting behind it', 'For'], blocked, [3, 4], 'Keys waiting behind a failed entry'),
    );
  }
  return [ui.card("This app's consumer", ...body)];
}

/** Which master serves which streams and partitions (this overview page's streams). */
async function clusterPage(): Promise<Child[]> {
  const o = await ui.get(`api/overview?page=${ui.state.page}`);
  const byNode = new Map<string, string[]>();
  for (const s of o.streams) if (s.node !== null) byNode.set(s.node, [...(byNode.get(s.node) ?? []), s.stream]);
  if (byNode.size === 0)
    return [
      ui.el('h1', {}, 'Cluster'),
      ui.el(
        'p',
        { class: 'empty' },
        'One node: not a cluster. Start the dashboard with --cluster to see which master serves which streams.',
      ),
    ];
  const rows = [...byNode]
    .sort()
    .map(([node, streams]) => [
      node,
      ui.num(streams.length),
      ui.el('ul', {}, ...streams.map((name) => ui.el('li', { class: 'name' }, ui.link(name, ui.hash('stream', name))))),
    ]);
  return [
    ui.el('h1', {}, 'Cluster'),
    ui.card(null, ui.table(['Master', 'Streams', 'Streams and partitions it serves'], rows, [1], 'Masters')),
    ui.el('p', {}, `The streams of overview page ${o.page + 1}.`),
  ];
}

/** How far a trim may go: the stream's oldest entry against the oldest one a group still needs (pending or not yet delivered). */
function headroom(s: any): Child {
  const needed = s.groups
    .flatMap((g: any) => [g.oldestPending?.id, g.firstUndeliveredId])
    .filter((id: string | null | undefined) => id)
    .sort((a: string, b: string) => {
      const [am, as] = a.split('-').map(BigInt);
      const [bm, bs] = b.split('-').map(BigInt);
      return am! === bm! ? (as! < bs! ? -1 : as! > bs! ? 1 : 0) : am! < bm! ? -1 : 1;
    })[0];
  const since = (id: string) => ui.age(ui.idAge(id));
  if (!s.firstEntryId) return ui.el('p', {}, 'Trim headroom: the stream is empty.');
  if (!needed)
    return ui.el('p', {}, `Trim headroom: no group needs any entry; the oldest is ${s.firstEntryId} (${since(s.firstEntryId)} old).`);
  return ui.el(
    'p',
    {},
    `Trim headroom: the oldest entry is ${s.firstEntryId} (${since(s.firstEntryId)} old); the oldest a group still needs is ${needed} (${since(needed)} old). A trim (MAXLEN, MINID) past ${needed} loses work.`,
  );
}

/** The panels, for app-script.ts to send. */
export const PANEL_PARTS = { consumerPanel, clusterPage, headroom };
export type Panels = typeof PANEL_PARTS;
