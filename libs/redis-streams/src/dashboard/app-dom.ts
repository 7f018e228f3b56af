/* The dashboard's browser code, part 1 of 4: DOM and formatting helpers, and the API calls.
 * These functions are sent as their source (app-script.ts) into one function scope, where `ui`
 * holds all parts and the page's state: they use `ui` and each other, nothing else of this module.
 * Everything from Redis goes in as text (textContent, never HTML). */

export type Child = Node | string | number | null | undefined | false;
export interface AppState {
  actions: boolean;
  /** A transport runs beside the dashboard (in-app): its health is shown. */
  consumer: boolean;
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
}
/** Made by the served script (app-script.ts), not by this module. */
declare const ui: { state: AppState; render(tick?: boolean): Promise<void> };

function el(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'checked') (e as HTMLInputElement).checked = Boolean(v);
    else if (k === 'value') (e as HTMLInputElement).value = String(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(typeof c === 'object' ? c : String(c));
  return e;
}

function link(text: string, hash: string, focus?: string): HTMLElement {
  return el('a', { href: hash, 'data-focus': focus }, text);
}

function button(name: string, focus: string, action: () => void): HTMLElement {
  return el('button', { type: 'button', 'data-focus': focus, onclick: action }, name);
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

function when(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}

function table(head: string[], rows: Child[][], numeric: number[], label: string): HTMLElement {
  const cls = (i: number) => (numeric.includes(i) ? 'n' : undefined);
  return el(
    'table',
    { 'aria-label': label },
    el('thead', {}, el('tr', {}, ...head.map((h, i) => el('th', { class: cls(i), scope: 'col' }, h)))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((c, i) => el('td', { class: cls(i) }, c))))),
  );
}

function spark(values: number[], what: string): Node {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  const shown = values.slice(-60);
  const max = Math.max(1, ...shown);
  for (const [k, v] of [
    ['class', 'spark'],
    ['width', '90'],
    ['height', '20'],
    ['role', 'img'],
    ['aria-label', `${what} per second, last ${shown.length} refreshes`],
  ])
    svg.setAttribute(k!, v!);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('fill', 'none');
  line.setAttribute('stroke', 'currentColor');
  line.setAttribute('points', shown.map((v, i) => `${(i * 90) / Math.max(1, shown.length - 1)},${19 - (v / max) * 18}`).join(' '));
  svg.append(line);
  return svg;
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

async function act(path: string, body: unknown, done: (reply: any) => string): Promise<void> {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
    body: JSON.stringify(body),
  });
  const reply = await r.json();
  ui.state.message = r.ok ? done(reply) : `refused: ${reply.error}`;
  ui.state.selected.clear();
  rerender();
}

/** Ms since an entry id's time; null when the id is no time (before 2000, or in the future). */
function idAge(id: string): number | null {
  const born = Number(id.split('-')[0]);
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

/** The helpers, for app-script.ts to send and for the other parts' types. */
export const DOM_PARTS = {
  idAge,
  pelStateLabel,
  el,
  link,
  button,
  num,
  count,
  rate,
  age,
  when,
  table,
  spark,
  pager,
  rerender,
  get,
  act,
};
export type Dom = typeof DOM_PARTS;
