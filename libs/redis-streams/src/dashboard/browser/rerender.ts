/* Rendering again after a change on the page. The renderer (render.ts) imports every page, and the
 * pages ask for a render: it is handed in at start-up (main.ts) so that no module imports its importer. */
import { state } from './state.js';

let renderer: () => Promise<void> = async () => undefined;

export function setRenderer(render: () => Promise<void>): void {
  renderer = render;
}

/** Renders the page again now, in full (what it showed is forgotten, so the new page goes in even if equal). */
export function rerender(): void {
  state.last = '';
  void renderer();
}
