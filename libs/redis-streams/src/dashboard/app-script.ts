/* The dashboard's browser code, part 5 of 5: routing, rendering, start-up, and the script that
 * sends all parts (their compiled sources in one function scope, then main()).
 * Deep links: #/ (overview), #/stream/<key>[/<group>], #/entry/<key>/<id>, #/dead, #/dead/<key>, #/cluster,
 * each part URI-encoded. */
import { CHART_PARTS, type Charts } from './app-charts.js';
import { DOM_PARTS, type AppState, type Child, type Dom } from './app-dom.js';
import { PAGE_PARTS, type Pages } from './app-pages.js';
import { PANEL_PARTS, type Panels } from './app-panels.js';

/** Made by the served script (appScript), not by this module. */
declare const ui: Dom & Charts & Pages & Panels & { state: AppState; render(tick?: boolean): Promise<void> };

function view(): { load: () => Promise<Child[]>; live: boolean; nav: string } {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  let decoded: string[];
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    // A hand-typed link with a stray % is no page: the overview, not an exception.
    decoded = [''];
  }
  const [page, a, b] = decoded;
  if (page === 'stream' && a) return { load: () => ui.streamPage(a, b || undefined), live: true, nav: 'overview' };
  // An entry does not change: read once (and again only when asked in full).
  if (page === 'entry' && a && b) return { load: () => ui.entryPage(a, b), live: false, nav: 'overview' };
  if (page === 'dead' && a) return { load: () => ui.deadPage(a), live: true, nav: 'dead' };
  if (page === 'dead') return { load: () => ui.deadListPage(), live: true, nav: 'dead' };
  if (page === 'cluster') return { load: () => ui.clusterPage(), live: true, nav: 'cluster' };
  return { load: () => ui.overviewPage(), live: true, nav: 'overview' };
}

/** Light or dark: the visitor's choice (remembered in this browser), else the system's. */
function applyTheme(): void {
  let chosen: string | null = null;
  try {
    chosen = localStorage.getItem('redis-streams-dashboard:theme');
  } catch {
    // Storage refused (a private window's policy): the system's theme.
  }
  const dark = chosen ? chosen === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  const toggle = document.getElementById('theme');
  toggle?.setAttribute('aria-pressed', String(dark));
  toggle?.setAttribute('title', dark ? 'Dark theme (press for light)' : 'Light theme (press for dark)');
}

function toggleTheme(): void {
  const dark = document.documentElement.dataset.theme !== 'dark';
  try {
    localStorage.setItem('redis-streams-dashboard:theme', dark ? 'dark' : 'light');
  } catch {
    // Not remembered, still applied.
  }
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  applyTheme();
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
  // The page asked for now; fresh: not yet shown (a navigation, or the first render).
  const hash = location.hash;
  const fresh = ui.state.last === '' || ui.state.shown !== hash;
  try {
    const v = view();
    for (const a of document.querySelectorAll('[data-nav]'))
      if (a.getAttribute('data-nav') === v.nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    if (tick && !v.live) return;
    const fragment = ui.el('div', {}, ...(await v.load()));
    // Navigated while this page loaded: the render after this one (asked by the navigation) shows the new page.
    if (location.hash !== hash) return;
    // A refresh waits while a button is held down: replaced under the pointer, its click would be lost.
    if (tick && ui.state.holding) return;
    // Put in only when something changed, keeping the keyboard focus where it was.
    if (fragment.innerHTML !== ui.state.last) {
      const focused = (document.activeElement as HTMLElement | null)?.getAttribute('data-focus');
      const html = fragment.innerHTML;
      // A form being typed in stays the very element it was (caret, half-typed text): only what is around it is new.
      for (const kept of fragment.querySelectorAll('[data-keep]')) {
        const old = app.querySelector(`[data-keep="${CSS.escape(kept.getAttribute('data-keep')!)}"]`);
        if (old) kept.replaceWith(old);
      }
      app.replaceChildren(...fragment.childNodes);
      ui.state.last = html;
      ui.state.shown = hash;
      if (focused) (app.querySelector(`[data-focus="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    // Refreshes done, for tests and scripts that wait for the page to have caught up.
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes ?? 0) + 1);
  } catch (err) {
    status.textContent = `refresh failed: ${(err as Error).message}`;
    // A new page that failed shows why, not the page before it (a navigation during a refresh included).
    if (fresh && location.hash === hash) {
      app.replaceChildren(ui.el('p', { role: 'alert', class: 'bad' }, `Could not load this page: ${(err as Error).message}`));
      ui.state.last = '';
      ui.state.shown = hash;
    }
  } finally {
    ui.state.rendering = false;
    if (ui.state.again) {
      ui.state.again = false;
      void render();
    }
  }
}

function main(): void {
  applyTheme();
  document.getElementById('theme')?.addEventListener('click', toggleTheme);
  // Held down: the next refresh waits (see render); released: it goes on.
  document.addEventListener('pointerdown', () => (ui.state.holding = true), true);
  for (const end of ['pointerup', 'pointercancel'])
    document.addEventListener(end, () => setTimeout(() => (ui.state.holding = false), 0), true);
  // Leaving the page ends a delete's undo time: it is sent now, as the page said it would be, not dropped unsaid.
  window.addEventListener('pagehide', () => {
    const pending = ui.state.undo;
    if (!pending) return;
    clearTimeout(pending.timer);
    ui.state.undo = null;
    pending.run();
  });
  window.addEventListener('hashchange', () => {
    Object.assign(ui.state, { message: '', entryFull: false, page: 0 });
    // Emptied in place: a render in flight holds these very objects.
    Object.assign(ui.state.search, { from: '', to: '', field: '', value: '' });
    ui.state.selected.clear();
    ui.rerender();
  });
  void ui.get('api/config').then((c) => {
    ui.state.actions = c.actions;
    ui.state.consumer = c.consumer;
    ui.state.minIdleMs = c.minIdleMs;
    ui.rerender();
    setInterval(() => void render(true), 1000);
  });
}

function newState(): AppState {
  return {
    actions: false,
    consumer: false,
    minIdleMs: 30_000,
    selected: new Set(),
    reason: '',
    after: new Map(),
    page: 0,
    entryFull: false,
    last: '',
    message: '',
    rendering: false,
    again: false,
    series: new Map(),
    window: 5,
    search: { from: '', to: '', field: '', value: '' },
    undo: null,
    found: null,
    holding: false,
    shown: '',
  };
}

const SCRIPT_PARTS = { view, applyTheme, toggleTheme, render, main, newState };

/** The browser script: every part's compiled source in one scope, `ui` over them all, then main(). No bundler, no CDN. */
export function appScript(): string {
  const parts = { ...DOM_PARTS, ...CHART_PARTS, ...PAGE_PARTS, ...PANEL_PARTS, ...SCRIPT_PARTS };
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
