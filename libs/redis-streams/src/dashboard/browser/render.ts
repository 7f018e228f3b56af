/* Rendering the page the hash names into <main>: once per navigation, and every second for a live page. */
import { el } from './dom.js';
import { view } from './routes.js';
import { state } from './state.js';

export async function render(tick = false): Promise<void> {
  const app = document.getElementById('app')!;
  const status = document.getElementById('status')!;
  // One render at a time; a navigation during one renders again after it (a tick may skip, a navigation may not).
  if (state.rendering) {
    if (!tick) state.again = true;
    return;
  }
  state.rendering = true;
  // The page asked for now; fresh: not yet shown (a navigation, or the first render).
  const hash = location.hash;
  const fresh = state.last === '' || state.shown !== hash;
  try {
    const v = view();
    for (const a of document.querySelectorAll('[data-nav]'))
      if (a.getAttribute('data-nav') === v.nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    if (tick && !v.live) return;
    const fragment = el('div', {}, ...(await v.load()));
    // Navigated while this page loaded: the render after this one (asked by the navigation) shows the new page.
    if (location.hash !== hash) return;
    // A refresh waits while a button is held down: replaced under the pointer, its click would be lost.
    if (tick && state.holding) return;
    // Put in only when something changed, keeping the keyboard focus where it was.
    if (fragment.innerHTML !== state.last) {
      const focused = (document.activeElement as HTMLElement | null)?.getAttribute('data-focus');
      const html = fragment.innerHTML;
      // A form being typed in stays the very element it was (caret, half-typed text): only what is around it is new.
      for (const kept of fragment.querySelectorAll('[data-keep]')) {
        const old = app.querySelector(`[data-keep="${CSS.escape(kept.getAttribute('data-keep')!)}"]`);
        if (old) kept.replaceWith(old);
      }
      app.replaceChildren(...fragment.childNodes);
      state.last = html;
      state.shown = hash;
      if (focused) app.querySelector<HTMLElement>(`[data-focus="${CSS.escape(focused)}"]`)?.focus();
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    // Refreshes done, for tests and scripts that wait for the page to have caught up.
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes ?? 0) + 1);
  } catch (err) {
    status.textContent = `refresh failed: ${(err as Error).message}`;
    // A new page that failed shows why, not the page before it (a navigation during a refresh included).
    if (fresh && location.hash === hash) {
      app.replaceChildren(el('p', { role: 'alert', class: 'bad' }, `Could not load this page: ${(err as Error).message}`));
      state.last = '';
      state.shown = hash;
    }
  } finally {
    state.rendering = false;
    if (state.again) {
      state.again = false;
      void render();
    }
  }
}
