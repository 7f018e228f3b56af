/* The charts' window: 5, 15 or 60 minutes of the server's kept past and what the page has seen. */
import { button, el, type Child } from './dom.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

export function windowPicker(): Child {
  return el(
    'p',
    { class: 'small muted' },
    'Charts show ',
    ...[5, 15, 60].map((m) =>
      button(
        `${m} min`,
        `window:${m}`,
        () => ((state.window = m), rerender()),
        m === state.window ? 'small primary' : 'small',
        `Show the last ${m} minutes`,
      ),
    ),
    ' (from the server’s kept past when it keeps one, then what this tab sees).',
  );
}
