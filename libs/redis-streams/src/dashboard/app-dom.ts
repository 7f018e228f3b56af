/* The dashboard's browser code, part 1 of 5: DOM and formatting helpers, and the API calls.
 * These functions are sent as their source (app-script.ts) into one function scope, where `ui`
 * holds all parts and the page's state: they use `ui` and each other, nothing else of this module.
 * Everything from Redis goes in as text (textContent, never HTML). */

export type Child = Node | string | number | null | undefined | false;

/** What the page has seen of one chart's figures since it was opened: times and, per line, values. */
export interface Series {
  at: number[];
  lines: Record<string, (number | null)[]>;
}

export interface AppState {
  /** Whether this visitor may act (the server asked the action guard for this page's request). */
  actions: boolean;
  /** A transport runs beside the dashboard (in-app): its health is shown. */
  consumer: boolean;
  /** The workers' minIdleMs (the dashboard's option): what counts as idle too long. */
  minIdleMs: number;
  selected: Set<string>;
  reason: string;
  after: Map<string, string>;
  page: number;
  entryFull: boolean;
  last: string;
  message: string;
  rendering: boolean;
  /** A navigation came while rendering: render once more after. */
  again: boolean;
  /** Figures per chart key, kept in the tab (at most an hour of refreshes). */
  series: Map<string, Series>;
  /** The charts' window in minutes. */
  window: number;
  /** The stream page's entry search. */
  search: { from: string; to: string; field: string; value: string };
  /** The last search's answer, for the refreshes that follow it (a search is not read again each second). */
  found: { params: string; page: any } | null;
  /** The hash of the page on screen (what `last` shows). */
  shown: string;
  /** A pointer is down on the page: refreshes wait until it is up. */
  holding: boolean;
  /** A delete waiting out its undo time: what it will delete, and its timer. */
  undo: { label: string; timer: number; run: () => void } | null;
}
/** Made by the served script (app-script.ts), not by this module. */
declare const ui: { state: AppState; render(tick?: boolean): Promise<void> };

function el(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false || v === null) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'checked') (e as HTMLInputElement).checked = Boolean(v);
    else if (k === 'value') (e as HTMLInputElement).value = String(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(typeof c === 'object' ? c : String(c));
  return e;
}

function link(text: Child, hash: string, focus?: string): HTMLElement {
  return el('a', { href: hash, 'data-focus': focus }, text);
}

/** The hash of a page: each part encoded (a name may hold `/`, `#` or anything else). */
function hash(...parts: string[]): string {
  return `#/${parts.map(encodeURIComponent).join('/')}`;
}

function button(name: string, focus: string, action: (ev: Event) => void, cls?: string, label?: string): HTMLElement {
  return el('button', { type: 'button', 'data-focus': focus, onclick: action, class: cls, 'aria-label': label }, name);
}

function num(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : Math.round(n).toLocaleString('en-US');
}

/** `n` (thousands separated) and its noun, singular for exactly one (readable.ts' counted, in the page). */
function count(n: number, one: string, many: string): string {
  return `${num(n)} ${n === 1 ? one : many}`;
}

function rate(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : n < 10 ? n.toFixed(1) : num(n);
}

function age(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || ms < 0) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7200000) return `${(ms / 60000).toFixed(1)} min`;
  return ms < 172800000 ? `${(ms / 3600000).toFixed(1)} h` : `${(ms / 86400000).toFixed(1)} d`;
}

/** A moment in local time, its UTC form on hover (and in `datetime`); a value that is no date shown as it is. */
function when(ms: number): Child {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  const local = d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return el('time', { datetime: d.toISOString(), title: `${d.toISOString()} (UTC)` }, local);
}

/** An entry id: never wrapped, its time on hover. */
function idCell(value: string): HTMLElement {
  const ms = Number(value.split('-')[0]);
  const d = new Date(ms);
  const title = Number.isNaN(d.getTime()) || ms < 946684800000 ? undefined : `${d.toLocaleString()} · ${d.toISOString()} (UTC)`;
  return el('span', { class: 'id', title }, value);
}

/**
 * A table that scrolls inside itself on a narrow screen. `numeric`: the indexes of right-aligned
 * columns, counted on `head` as given (a select column included).
 */
function table(head: string[], rows: Child[][], numeric: number[], label: string, empty?: string): HTMLElement {
  if (rows.length === 0 && empty) return el('p', { class: 'empty' }, empty);
  const cls = (i: number) => (numeric.includes(i) ? 'n' : undefined);
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { 'aria-label': label },
      el('thead', {}, el('tr', {}, ...head.map((h, i) => el('th', { class: cls(i), scope: 'col' }, h)))),
      el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((c, i) => el('td', { class: cls(i) }, c))))),
    ),
  );
}

function card(title: Child, ...children: Child[]): HTMLElement {
  return el(
    'section',
    { class: 'card', 'aria-label': typeof title === 'string' ? title : undefined },
    title ? el('h2', {}, title) : null,
    ...children,
  );
}

/** A state said three ways: a word, a shape and a colour. */
function chip(state: 'healthy' | 'attention' | 'failing', text?: string): HTMLElement {
  const mark = { healthy: '●', attention: '▲', failing: '✖' }[state];
  const word = { healthy: 'Healthy', attention: 'Attention', failing: 'Failing' }[state];
  return el('span', { class: `chip ${state}` }, `${mark} ${text ?? word}`);
}

function pager(key: string, next: string | null | undefined): Child[] {
  const after = ui.state.after.get(key);
  const go = (to: string | undefined) => () => {
    if (to === undefined) ui.state.after.delete(key);
    else ui.state.after.set(key, to);
    rerender();
  };
  return [after ? button('First page', `first:${key}`, go(undefined)) : null, next ? button('Next page', `next:${key}`, go(next)) : null];
}

function rerender(): void {
  ui.state.last = '';
  void ui.render();
}

async function get(path: string): Promise<any> {
  const r = await fetch(path, { cache: 'no-store' });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error ?? r.statusText);
  return body;
}

/** Sends an action; its answer (or refusal) becomes the page's message. Resolves the reply, or null when refused. */
async function act(path: string, body: unknown, done: (reply: any) => string): Promise<any> {
  const r = await fetch(path, {
    method: 'POST',
    // Sent whole even when the page goes meanwhile (a delete whose undo time a reload ended: see main()).
    keepalive: true,
    headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
    body: JSON.stringify(body),
  });
  const reply = await r.json();
  // A late answer is no refusal: the action may still be done (the server says so).
  ui.state.message = r.ok ? done(reply) : reply.outcome === 'unknown' ? `no answer in time: ${reply.error}` : `refused: ${reply.error}`;
  ui.state.selected.clear();
  rerender();
  return r.ok ? reply : { refused: reply };
}

/**
 * An action on one pending entry: asked first (naming what will happen); refused because its owner is
 * connected, asked again whether to force it; refused because the entry is gone from its stream (a
 * dead-letter), asked again whether to write an empty letter.
 */
async function actOnPending(path: string, body: Record<string, unknown>, question: string, done: (reply: any) => string): Promise<void> {
  if (!confirm(question)) return;
  const more: Record<string, boolean> = {};
  for (let round = 0; round < 3; round++) {
    const refused = (await act(path, { ...body, ...more }, done))?.refused;
    if (!refused) return;
    if ((refused.reason === 'owner-connected' || refused.reason === 'owner-unknown') && !more.force) {
      if (!confirm(`${refused.error}\n\nDo it anyway? Its owner may still be handling it: it may then run twice.`)) return;
      more.force = true;
    } else if (refused.reason === 'gone' && path.endsWith('/dead-letter') && !more.empty) {
      if (!confirm(`${refused.error}\n\nWrite its dead letter anyway, with no fields, and take it off the pending list?`)) return;
      more.empty = true;
    } else return;
  }
}

/** A name from Redis for a dialog's text: control, line-breaking and bidi characters as escapes (a name cannot add lines to a question). */
function named(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    /[\u0000-\u001f\u007f-\u009f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** A message with an Undo button, gone after `ms`: `run` is done then, unless undone first. */
function later(label: string, ms: number, run: () => void): void {
  if (ui.state.undo) {
    clearTimeout(ui.state.undo.timer);
    ui.state.undo.run();
  }
  const timer = window.setTimeout(() => {
    ui.state.undo = null;
    showUndo();
    run();
  }, ms);
  ui.state.undo = { label, timer, run };
  showUndo();
}

/** The undo toast, outside <main> (re-renders never touch it). */
function showUndo(): void {
  document.getElementById('undo')?.remove();
  const u = ui.state.undo;
  if (!u) return;
  const undo = () => {
    clearTimeout(u.timer);
    ui.state.undo = null;
    ui.state.message = `undone: ${u.label}`;
    showUndo();
    rerender();
  };
  document.body.append(el('div', { id: 'undo', class: 'toast', role: 'status' }, el('span', {}, u.label), button('Undo', 'undo', undo)));
}

/** Ms since an entry id's time; null when the id is no time (before 2000, or in the future). */
function idAge(value: string): number | null {
  const born = Number(value.split('-')[0]);
  const now = Date.now();
  return born >= 946684800000 && born <= now ? now - born : null;
}

/** What a pending entry waits for, in words. */
function pelStateLabel(state: string): string {
  const labels: Record<string, string> = {
    'retry-waiting': 'waiting for its retry',
    'retry-due': 'retry due',
    live: 'held by a live handler',
    'consumer-gone': 'consumer gone',
  };
  return labels[state] ?? 'unknown';
}

/** An ordered partition's durable acks, in words (its owner's last word: see AckDurability). */
function durabilityLabel(d: {
  state: string;
  since: number;
  confirmed: number | null;
  replicas: number;
  fsync: boolean;
  refused?: string;
}): string {
  const wanted = `${d.replicas} replica(s)${d.fsync ? ', fsynced' : ''}`;
  const got = d.refused ? `the wait refused: ${d.refused}` : `${d.confirmed ?? 0} of ${d.replicas} confirmed`;
  const since = age(Math.max(0, Date.now() - d.since));
  if (d.state === 'held') return ` Durable acks HELD for ${since}: ${got}; nothing starts until the replicas confirm.`;
  if (d.state === 'degraded') return ` Durable acks DEGRADED for ${since}: ${got}; carrying on without waiting.`;
  if (d.state === 'confirmed') return ` Durable acks on ${wanted}: confirmed.`;
  return ` Durable acks on ${wanted}: not confirmed yet.`;
}

/** The helpers, for app-script.ts to send and for the other parts' types. */
export const DOM_PARTS = {
  idAge,
  pelStateLabel,
  durabilityLabel,
  el,
  link,
  hash,
  button,
  num,
  count,
  rate,
  age,
  when,
  idCell,
  table,
  card,
  chip,
  pager,
  rerender,
  get,
  act,
  actOnPending,
  named,
  later,
  showUndo,
};
export type Dom = typeof DOM_PARTS;
