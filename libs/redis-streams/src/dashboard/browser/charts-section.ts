/* The three charts of a page (the overview's streams, or one stream): lag and pending, rates, dead letters. */
import { chart } from './chart.js';
import { ENTRIES, PER_SEC } from './chart-units.js';
import { windowPicker } from './chart-window.js';
import { el } from './dom.js';
import type { Figures } from './figures.js';
import type { HistorySeries } from './api-replies.js';

export function chartsSection(
  key: string,
  f: Omit<Figures, 'groups'> & { producedBefore?: number[] },
  history?: HistorySeries | null,
): HTMLElement {
  const h = history ?? undefined;
  const at = h?.at;
  // With the server's past, the rate line starts from it (its last minutes of refreshes are then not needed).
  const before = h ? {} : f.producedBefore ? { before: f.producedBefore } : {};
  return el(
    'section',
    { 'aria-label': 'Charts' },
    windowPicker(),
    el(
      'div',
      { class: 'charts' },
      chart(
        `${key}:lag`,
        'Lag and pending (entries)',
        [
          { name: 'lag', color: '--c1', value: f.lag, past: h?.lag },
          { name: 'pending', color: '--c2', value: f.pending, past: h?.pending },
        ],
        ENTRIES,
        at,
      ),
      chart(
        `${key}:rates`,
        'Produced and consumed (entries/s)',
        [
          { name: 'produced', color: '--c3', value: f.produced, past: h?.produced, ...before },
          { name: 'consumed', color: '--c1', value: f.consumed, past: h?.consumed },
        ],
        PER_SEC,
        at,
      ),
      chart(`${key}:dead`, 'Dead letters (entries)', [{ name: 'dead letters', color: '--c4', value: f.dead, past: h?.dead }], ENTRIES, at),
    ),
  );
}
