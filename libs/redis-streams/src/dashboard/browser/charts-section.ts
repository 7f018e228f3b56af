/* The three charts of a page (the overview's streams, or one stream): lag and pending, rates, dead letters. */
import { chart } from './chart.js';
import { ENTRIES, PER_SEC } from './chart-units.js';
import { windowPicker } from './chart-window.js';
import { el } from './dom.js';
import type { Figures } from './figures.js';

export function chartsSection(key: string, f: Omit<Figures, 'groups'> & { producedBefore?: number[] }): HTMLElement {
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
          { name: 'lag', color: '--c1', value: f.lag },
          { name: 'pending', color: '--c2', value: f.pending },
        ],
        ENTRIES,
      ),
      chart(
        `${key}:rates`,
        'Produced and consumed (entries/s)',
        [
          { name: 'produced', color: '--c3', value: f.produced, ...(f.producedBefore ? { before: f.producedBefore } : {}) },
          { name: 'consumed', color: '--c1', value: f.consumed },
        ],
        PER_SEC,
      ),
      chart(`${key}:dead`, 'Dead letters (entries)', [{ name: 'dead letters', color: '--c4', value: f.dead }], ENTRIES),
    ),
  );
}
