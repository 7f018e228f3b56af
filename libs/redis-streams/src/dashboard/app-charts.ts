/* The dashboard's browser code, part 2 of 5: line charts (SVG, no library: a few hundred lines of
 * script against a charting library's 40-50 KB, and nothing the page's CSP must allow).
 * The page keeps each chart's figures as it refreshes (at most an hour of them, in the tab); rates
 * come with the server's last minutes too. Sent as source with the other parts (app-script.ts). */
import type { AppState, Child, Dom, Series } from './app-dom.js';

/** Made by the served script (app-script.ts), not by this module. */
declare const ui: Dom & { state: AppState };

/** One line of a chart: its name, its colour (a CSS variable) and this refresh's value (null: unknown). */
export interface Line {
  name: string;
  color: string;
  value: number | null | undefined;
  /** Values of the refreshes before this one, oldest first (a rate's history from the server), to start from. */
  before?: number[];
}

/** Adds this refresh's values to the chart's series (once per refresh: a second render within 0.5 s adds nothing). */
function record(key: string, lines: Line[], now: number): Series {
  // Points kept per chart: an hour at one refresh a second. (Constants live in the functions: only functions are sent.)
  const KEEP = 3600;
  let s = ui.state.series.get(key);
  if (!s) {
    s = { at: [], lines: {} };
    // A rate's past, as the server kept it (about a second apart): the chart starts with minutes, not a dot.
    const seed = Math.max(0, ...lines.map((l) => l.before?.length ?? 0));
    for (let i = 0; i < seed; i++) s.at.push(now - (seed - i) * 1000);
    for (const l of lines) {
      const b = l.before ?? [];
      s.lines[l.name] = [...new Array<null>(seed - b.length).fill(null), ...b];
    }
    ui.state.series.set(key, s);
  }
  if (s.at.length > 0 && now - s.at[s.at.length - 1]! < 500) return s;
  s.at.push(now);
  for (const l of lines) {
    const values = (s.lines[l.name] ??= new Array<null>(s.at.length - 1).fill(null));
    values.push(typeof l.value === 'number' && Number.isFinite(l.value) ? l.value : null);
    if (values.length > KEEP) values.splice(0, values.length - KEEP);
  }
  if (s.at.length > KEEP) s.at.splice(0, s.at.length - KEEP);
  return s;
}

/** The smallest 1, 2 or 5 × 10ⁿ at or above `n` (an axis' top). */
function niceCeil(n: number): number {
  if (n <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= n)!;
}

function svgEl(tag: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * A chart of `lines` over the chosen window: axes with units, a legend with the latest values, and
 * the values at the pointer on hover (or focus and arrow keys). `fmt` formats a value with its unit.
 */
function chart(key: string, title: string, lines: Line[], fmt: (n: number) => string): HTMLElement {
  // The drawing's own units (its viewBox): the SVG scales to its card's width.
  const [W, H, LEFT, BOTTOM] = [400, 150, 44, 18];
  const now = Date.now();
  const s = record(key, lines, now);
  const since = now - ui.state.window * 60_000;
  const first = Math.max(
    0,
    s.at.findIndex((t) => t >= since),
  );
  const at = s.at.slice(first);
  const values = lines.map((l) => (s.lines[l.name] ?? []).slice(first));
  const max = niceCeil(Math.max(0, ...values.flat().filter((v): v is number => v !== null)));
  const x = (t: number) => LEFT + ((t - since) / (now - since)) * (W - LEFT - 4);
  const y = (v: number) => H - BOTTOM - (v / max) * (H - BOTTOM - 8);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', focusable: 'false' }) as SVGSVGElement;
  for (const f of [0, 0.5, 1]) {
    svg.append(svgEl('line', { class: 'grid', x1: LEFT, x2: W - 4, y1: y(max * f), y2: y(max * f) }));
    svg.append(svgEl('text', { class: 'axis', x: LEFT - 4, y: y(max * f) + 3, 'text-anchor': 'end' }, fmt(max * f)));
  }
  const minutes = ui.state.window;
  for (const [f, label] of [
    [0, `−${minutes} min`],
    [0.5, `−${minutes / 2} min`],
    [1, 'now'],
  ] as const)
    svg.append(
      svgEl(
        'text',
        { class: 'axis', x: LEFT + f * (W - LEFT - 4), y: H - 4, 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle' },
        label,
      ),
    );
  lines.forEach((l, i) => {
    // A gap (an unknown value) breaks the line rather than drawing through it.
    let points: string[] = [];
    const flush = () => {
      if (points.length > 0)
        svg.append(svgEl('polyline', { points: points.join(' '), fill: 'none', stroke: `var(${l.color})`, 'stroke-width': 1.6 }));
      points = [];
    };
    values[i]!.forEach((v, j) => (v === null ? flush() : points.push(`${x(at[j]!).toFixed(1)},${y(v).toFixed(1)}`)));
    if (points.length === 1)
      svg.append(svgEl('circle', { cx: points[0]!.split(',')[0]!, cy: points[0]!.split(',')[1]!, r: 2, fill: `var(${l.color})` }));
    flush();
  });
  const latest = lines.map((l, i) => `${l.name} ${fmt(values[i]!.at(-1) ?? NaN)}`).join(', ');
  const shown = values.map((v) => v.filter((n): n is number => n !== null));
  const peak = shown.flat().length ? fmt(Math.max(...shown.flat())) : '–';
  svg.setAttribute('aria-label', `${title}, last ${minutes} min: now ${latest}; peak ${peak}`);
  const legend = ui.el(
    'div',
    { class: 'legend' },
    ...lines.map((l, i) => {
      const swatch = ui.el('span', { class: 'swatch' });
      swatch.style.background = `var(${l.color})`;
      return ui.el('span', {}, swatch, `${l.name} `, ui.el('strong', {}, fmt(values[i]!.at(-1) ?? NaN)));
    }),
  );
  const readout = ui.el('div', { class: 'legend', 'aria-live': 'off' }, ' ');
  const hover = svgEl('line', { class: 'hover', x1: -10, x2: -10, y1: 4, y2: H - BOTTOM, visibility: 'hidden' });
  svg.append(hover);
  const show = (j: number) => {
    if (j < 0 || j >= at.length) return;
    hover.setAttribute('x1', String(x(at[j]!)));
    hover.setAttribute('x2', String(x(at[j]!)));
    hover.setAttribute('visibility', 'visible');
    const t = new Date(at[j]!).toLocaleTimeString();
    readout.textContent = `${t}: ${lines.map((l, i) => `${l.name} ${fmt(values[i]![j] ?? NaN)}`).join(', ')}`;
  };
  let index = at.length - 1;
  svg.addEventListener('pointermove', (ev) => {
    const box = svg.getBoundingClientRect();
    const t = since + (((ev.clientX - box.left) / box.width) * W - LEFT) / ((W - LEFT - 4) / (now - since));
    let best = 0;
    at.forEach((a, j) => (Math.abs(a - t) < Math.abs(at[best]! - t) ? (best = j) : 0));
    index = best;
    show(best);
  });
  svg.addEventListener('pointerleave', () => hover.setAttribute('visibility', 'hidden'));
  // Keyboard: focus the chart, then ← → walk its points.
  svg.setAttribute('tabindex', '0');
  svg.addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowLeft' && ev.key !== 'ArrowRight') return;
    index = Math.max(0, Math.min(at.length - 1, index + (ev.key === 'ArrowLeft' ? -1 : 1)));
    show(index);
    ev.preventDefault();
  });
  return ui.el(
    'figure',
    { class: 'chart card', 'data-points': at.length, 'data-chart': key },
    ui.el('h3', {}, title),
    svg as unknown as HTMLElement,
    legend,
    readout,
  );
}

/** The charts' window: 5, 15 or 60 minutes of what the page has seen. */
function windowPicker(): Child {
  return ui.el(
    'p',
    { class: 'small muted' },
    'Charts show ',
    ...[5, 15, 60].map((m) =>
      ui.button(
        `${m} min`,
        `window:${m}`,
        () => ((ui.state.window = m), ui.rerender()),
        m === ui.state.window ? 'small primary' : 'small',
        `Show the last ${m} minutes`,
      ),
    ),
    ' of what this tab has seen (rates: and the server’s last minutes).',
  );
}

/** Formats for the charts' units. */
function fmtPerSec(n: number): string {
  return Number.isNaN(n) ? '–' : `${ui.rate(n)}/s`;
}

function fmtEntries(n: number): string {
  if (Number.isNaN(n)) return '–';
  return n >= 10_000 ? `${ui.num(n / 1000)}k` : Number.isInteger(n) ? ui.num(n) : n.toFixed(1);
}

/** The charts, for app-script.ts to send. */
export const CHART_PARTS = { record, niceCeil, svgEl, chart, windowPicker, fmtPerSec, fmtEntries };
export type Charts = typeof CHART_PARTS;
