/* An action that waits out an undo time (a delete): a toast with an Undo button, outside <main> (re-renders never touch it). */
import { button, el } from './dom.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

/** A message with an Undo button, gone after `ms`: `run` is done then, unless undone first. */
export function later(label: string, ms: number, run: () => void): void {
  if (state.undo) {
    clearTimeout(state.undo.timer);
    state.undo.run();
  }
  const timer = window.setTimeout(() => {
    state.undo = null;
    showUndo();
    run();
  }, ms);
  state.undo = { label, timer, run };
  showUndo();
}

/** The undo toast. */
function showUndo(): void {
  document.getElementById('undo')?.remove();
  const u = state.undo;
  if (!u) return;
  const undo = () => {
    clearTimeout(u.timer);
    state.undo = null;
    state.message = `undone: ${u.label}`;
    showUndo();
    rerender();
  };
  document.body.append(el('div', { id: 'undo', class: 'toast', role: 'status' }, el('span', {}, u.label), button('Undo', 'undo', undo)));
}
