/* The dashboard's browser code, part 4 of 4: routing, rendering, start-up, and the script that
 * sends all three parts (their compiled sources in one function scope, then main()). */
import { DOM_PARTS, type AppState, type Child, type Dom } from './app-dom.js';
import { PAGE_PARTS, type Pages } from './app-pages.js';
import { PANEL_PARTS, type Panels } from './app-panels.js';

/** Made by the served script (appScript), not by this module. */
declare const ui: Dom & Pages & Panels & { state: AppState; render(tick?: boolean): Promise<void> };

function view(): { load: () => Promise<Child[]>; live: boolean } {
  const [page, a, b] = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (page === 'stream' && a) return { load: () => ui.streamPage(a), live: true };
  // An entry does not change: read once (and again only when asked in full).
  if (page === 'entry' && a && b) return { load: () => ui.entryPage(a, b), live: false };
  if (page === 'dead' && a) return { load: () => ui.deadPage(a), live: true };
  if (page === 'dead') return { load: () => ui.deadListPage(), live: true };
  if (page === 'cluster') return { load: () => ui.clusterPage(), live: true };
  return { load: () => ui.overviewPage(), live: true };
}

async function render(tick = false): Promise<void> {
  const app = document.getElementById('app')!;
  const status = document.getElementById('status')!;
  // One render at a time; a navigation during one renders again after it (a tick may skip, a navigation may not).
  if (ui.state.rendering) {
    if (!tick) ui.state.again = true;
    return;
  }
  ui.state.rendering = true;
  const fresh = ui.state.last === '';
  try {
    const v = view();
    if (tick && !v.live) return;
    const fragment = ui.el('div', {}, ...(await v.load()));
    // Put in only when something changed, keeping the keyboard focus where it was.
    if (fragment.innerHTML !== ui.state.last) {
      const focused = (document.activeElement as HTMLElement | null)?.getAttribute('data-focus');
      app.replaceChildren(...fragment.childNodes);
      ui.state.last = fragment.innerHTML;
      if (focused) (app.querySelector(`[data-focus="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    // Refreshes done, for tests and scripts that wait for the page to have caught up.
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes ?? 0) + 1);
  } catch (err) {
    status.textContent = `refresh failed: ${(err as Error).message}`;
    // A new page that failed shows why, not the page before it.
    if (fresh) app.replaceChildren(ui.el('p', { role: 'alert', class: 'bad' }, `Could not load this page: ${(err as Error).message}`));
  } finally {
    ui.state.rendering = false;
    if (ui.state.again) {
      ui.state.again = false;
      void render();
    }
  }
}

function main(): void {
  window.addEventListener('hashchange', () => {
    Object.assign(ui.state, { message: '', entryFull: false, page: 0 });
    ui.state.selected.clear();
    ui.rerender();
  });
  void ui.get('api/config').then((c) => {
    ui.state.actions = c.actions;
    ui.state.consumer = c.consumer;
    ui.rerender();
    setInterval(() => void render(true), 1000);
  });
}

function newState(): AppState {
  return {
    actions: false,
    consumer: false,
    selected: new Set(),
    reason: '',
    after: new Map(),
    page: 0,
    entryFull: false,
    last: '',
    message: '',
    rendering: false,
    again: false,
  };
}

const SCRIPT_PARTS = { view, render, main, newState };

/** The browser script: every part's compiled source in one scope, `ui` over them all, then main(). No bundler, no CDN. */
export function appScript(): string {
  const parts = { ...DOM_PARTS, ...PAGE_PARTS, ...PANEL_PARTS, ...SCRIPT_PARTS };
  const names = Object.keys(parts).filter((name) => name !== 'newState');
  return `(() => {
${Object.values(parts)
  .map((f) => f.toString())
  .join('\n')}
const ui = { ${names.join(', ')}, state: newState() };
main();
})();
`;
}
