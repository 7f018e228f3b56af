/* The dashboard page's script (served as app.js; bundled by scripts/bundle-dashboard.mjs): start-up. */
import { get } from './api.js';
import { render } from './render.js';
import { rerender, setRenderer } from './rerender.js';
import { state } from './state.js';
import { applyTheme, toggleTheme } from './theme.js';

function main(): void {
  setRenderer(render);
  applyTheme();
  document.getElementById('theme')?.addEventListener('click', toggleTheme);
  // Held down: the next refresh waits (see render); released: it goes on.
  document.addEventListener('pointerdown', () => (state.holding = true), true);
  for (const end of ['pointerup', 'pointercancel'])
    document.addEventListener(end, () => setTimeout(() => (state.holding = false), 0), true);
  // Leaving the page ends a delete's undo time: it is sent now, as the page said it would be, not dropped unsaid.
  window.addEventListener('pagehide', () => {
    const pending = state.undo;
    if (!pending) return;
    clearTimeout(pending.timer);
    state.undo = null;
    pending.run();
  });
  window.addEventListener('hashchange', () => {
    Object.assign(state, { message: '', entryFull: false, page: 0 });
    // Emptied in place: a render in flight holds these very objects.
    Object.assign(state.search, { from: '', to: '', field: '', value: '' });
    state.selected.clear();
    rerender();
  });
  void get('config').then((c) => {
    state.actions = c.actions;
    state.consumer = c.consumer;
    state.minIdleMs = c.minIdleMs;
    rerender();
    setInterval(() => void render(true), 1000);
  });
}

main();
