/* A line chart in SVG, no library: a few hundred lines of script against a charting library's 40-50 KB,
 * and nothing the page's CSP must allow. */
import { el } from './dom.js';
import { record, type Line } from './chart-series.js';
import { axisTicks, type Unit } from './chart-units.js';
import { state } from './state.js';

function svgEl(tag: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * A chart of `lines` over the chosen window: axes with units, a legend with the latest values, and
 * the values at the pointer on hover (or focus and arrow keys), in `unit`.
 */
export function chart(key: string, title: string, lines: Line[], unit: Unit, pastAt?: number[]): HTMLElement {
  const { fmt } = unit;
  // The drawing's own units (its viewBox): the SVG scales to its card's width.
  const [W, H, LEFT, BOTTOM] = [400, 150, 44, 18];
  const now = Date.now();
  const s = record(key, lines, now, pastAt);
  const since = now - state.window * 60_000;
  const first = Math.max(
    0,
    s.at.findIndex((t) => t >= since),
  );
  const at = s.at.slice(first);
  const values = lines.map((l) => (s.lines[l.name] ?? []).slice(first));
  const ticks = axisTicks(Math.max(0, ...values.flat().filter((v): v is number => v !== null)), unit);
  const max = ticks.at(-1)!.value;
  const x = (t: number) => LEFT + ((t - since) / (now - since)) * (W - LEFT - 4);
  const y = (v: number) => H - BOTTOM - (v / max) * (H - BOTTOM - 8);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', focusable: 'false' }) as SVGSVGElement;
  for (const t of ticks) {
    svg.append(svgEl('line', { class: 'grid', x1: LEFT, x2: W - 4, y1: y(t.value), y2: y(t.value) }));
    svg.append(svgEl('text', { class: 'axis', x: LEFT - 4, y: y(t.value) + 3, 'text-anchor': 'end' }, t.label));
  }
  const minutes = state.window;
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
  const legend = el(
    'div',
    { class: 'legend' },
    ...lines.map((l, i) => {
      const swatch = el('span', { class: 'swatch' });
      swatch.style.background = `var(${l.color})`;
      return el('span', {}, swatch, `${l.name} `, el('strong', {}, fmt(values[i]!.at(-1) ?? NaN)));
    }),
  );
  const readout = el('div', { class: 'legend', 'aria-live': 'off' }, ' ');
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
  return el('figure', { class: 'chart card', 'data-points': at.length, 'data-chart': key }, el('h3', {}, title), svg, legend, readout);
}
