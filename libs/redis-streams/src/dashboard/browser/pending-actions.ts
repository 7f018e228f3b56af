/* The buttons of one pending entry: release, dead-letter, and retry-now for one waiting for its retry. */
import type { PendingMoveReply, PendingRow } from './api-replies.js';
import { actOnPending } from './api.js';
import { button, el, type Child } from './dom.js';
import { named } from './format.js';
import { state } from './state.js';

export function pendingActions(key: string, group: string, p: PendingRow): Child {
  if (!state.actions) return null;
  const body = { key, group, id: p.id };
  const waiting = p.state === 'retry-waiting' || p.state === 'retry-due';
  return el(
    'span',
    { class: 'row-actions' },
    button(
      'Release',
      `release:${p.id}`,
      () =>
        void actOnPending<PendingMoveReply>(
          'api/pending/release',
          body,
          `Release ${p.id}?\n\nIt stays pending under "${named(p.consumer)}", its idle time set past minIdleMs: the next worker that beats takes it and runs it again (delivery ${p.deliveries + 1}).`,
          (r) => `released ${p.id} (owner ${r.owner})`,
        ),
      'small',
      `Release ${p.id}`,
    ),
    button(
      'Dead-letter',
      `dead-letter:${p.id}`,
      () =>
        void actOnPending<PendingMoveReply>(
          'api/pending/dead-letter',
          body,
          `Dead-letter ${p.id}?\n\nIt is moved to the dead-letter stream with its fields and acked in the group: no handler runs it again unless you redrive it.`,
          (r) => `dead-lettered ${p.id} as ${r.deadLetterId}`,
        ),
      'small danger',
      `Dead-letter ${p.id}`,
    ),
    waiting
      ? button(
          'Retry now',
          `retry-now:${p.id}`,
          () =>
            void actOnPending<PendingMoveReply>(
              'api/pending/retry-now',
              body,
              `Retry ${p.id} now?\n\nIts retry is made due now and the entry released: the next worker that beats takes it and runs it (delivery ${p.deliveries + 1}).`,
              (r) => `${p.id} due now (owner ${r.owner})`,
            ),
          'small',
          `Retry ${p.id} now`,
        )
      : null,
  );
}
