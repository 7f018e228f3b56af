/* Paging a list by the id it ended at (a PEL, a dead-letter stream): first and next page buttons. */
import { button, type Child } from './dom.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

export function pager(key: string, next: string | null | undefined): Child[] {
  const after = state.after.get(key);
  const go = (to: string | undefined) => () => {
    if (to === undefined) state.after.delete(key);
    else state.after.set(key, to);
    rerender();
  };
  return [after ? button('First page', `first:${key}`, go(undefined)) : null, next ? button('Next page', `next:${key}`, go(next)) : null];
}
