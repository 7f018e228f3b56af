/* The buttons of one delayed entry: cancel it, or move it into its stream now. */
import type { DelayedChangeReply } from './api-replies.js';
import { act } from './api.js';
import { button, el, type Child } from './dom.js';
import { named } from './format.js';
import { state } from './state.js';

export function delayedActions(key: string, id: string): Child {
  if (!state.actions) return null;
  const body = { key, id };
  const cancel = () => {
    if (
      !confirm(`Cancel delayed entry ${named(id)} of ${named(key)}?\n\nIt is taken out of the schedule for good: no handler ever runs it.`)
    )
      return;
    void act<DelayedChangeReply>('api/delayed/cancel', body, (r) =>
      r.found ? `cancelled ${id}` : `${id} no longer waited (promoted or cancelled already)`,
    );
  };
  const promote = () => {
    if (
      !confirm(
        `Promote delayed entry ${named(id)} of ${named(key)} now?\n\nIt goes into the stream at once, as if it were due: every group reads it.`,
      )
    )
      return;
    void act<DelayedChangeReply>('api/delayed/promote', body, (r) => {
      if (r.moved && r.newId) state.promoted = { id, newId: r.newId };
      return !r.found
        ? `${id} no longer waited (promoted or cancelled already)`
        : r.moved
          ? `promoted ${id} into the stream as ${r.newId}`
          : r.dropped
            ? `${id} left the schedule unwritten: ${r.dropped === 'repeat' ? 'its idempotency key is held by another write' : 'it had no record'}`
            : `${id} could not go in${r.refused ? `: ${r.refused}` : ''}; it still waits`;
    });
  };
  return el(
    'span',
    { class: 'row-actions' },
    button('Promote', `promote:${id}`, promote, 'small', `Promote ${id}`),
    button('Cancel', `cancel:${id}`, cancel, 'small danger', `Cancel ${id}`),
  );
}
