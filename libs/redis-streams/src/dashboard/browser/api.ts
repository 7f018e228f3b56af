/* The dashboard's JSON API, from the page: reads, and actions whose answer becomes the page's message. */
import type { ActionRefusal, ApiReplies } from './api-replies.js';
import { rerender } from './rerender.js';
import { state } from './state.js';

/** A read of `api/<call><query>`; a refusal or failure throws with the server's reason. */
export async function get<K extends keyof ApiReplies>(call: K, query = ''): Promise<ApiReplies[K]> {
  const r = await fetch(`api/${call}${query}`, { cache: 'no-store' });
  // The server's contract (api-replies.ts): an answer of that call, or an error.
  const body = (await r.json()) as ApiReplies[K] & { error?: string };
  if (!r.ok) throw new Error(body.error ?? r.statusText);
  return body;
}

/** Sends an action; its answer (or refusal) becomes the page's message. Resolves its refusal, or null when done. */
export async function act<T>(path: string, body: unknown, done: (reply: T) => string): Promise<ActionRefusal | null> {
  const r = await fetch(path, {
    method: 'POST',
    // Sent whole even when the page goes meanwhile (a delete whose undo time a reload ended: see main()).
    keepalive: true,
    headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
    body: JSON.stringify(body),
  });
  const reply = (await r.json()) as unknown;
  const refusal = reply as ActionRefusal;
  // A late answer is no refusal: the action may still be done (the server says so).
  state.message = r.ok
    ? done(reply as T)
    : refusal.outcome === 'unknown'
      ? `no answer in time: ${refusal.error}`
      : `refused: ${refusal.error}`;
  state.selected.clear();
  rerender();
  return r.ok ? null : refusal;
}

/**
 * An action on one pending entry: asked first (naming what will happen); refused because its owner is
 * connected, asked again whether to force it; refused because the entry is gone from its stream (a
 * dead-letter), asked again whether to write an empty letter.
 */
export async function actOnPending<T>(
  path: string,
  body: Record<string, unknown>,
  question: string,
  done: (reply: T) => string,
): Promise<void> {
  if (!confirm(question)) return;
  const more: Record<string, boolean> = {};
  for (let round = 0; round < 3; round++) {
    const refused = await act(path, { ...body, ...more }, done);
    if (!refused) return;
    if ((refused.reason === 'owner-connected' || refused.reason === 'owner-unknown') && !more.force) {
      if (!confirm(`${refused.error}\n\nDo it anyway? Its owner may still be handling it: it may then run twice.`)) return;
      more.force = true;
    } else if (refused.reason === 'gone' && path.endsWith('/dead-letter') && !more.empty) {
      if (!confirm(`${refused.error}\n\nWrite its dead letter anyway, with no fields, and take it off the pending list?`)) return;
      more.empty = true;
    } else return;
  }
}
