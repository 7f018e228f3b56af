/* A group's state, and the worst of several: what the chips, the summary and the overview show. */
import type { GroupRow } from './api-replies.js';
import type { Health } from './dom.js';

/** Failing when nobody connected holds what waits, attention when something waits long. */
export function groupState(g: GroupRow, minIdleMs: number): Health {
  const connected = g.consumers.some((c) => c.connected !== false);
  if ((g.pending > 0 || (g.lag ?? 0) > 0) && g.consumers.length > 0 && !connected) return 'failing';
  const due = 'due' in g.retries ? g.retries.due : 0;
  if ((g.lagMs ?? 0) >= 60_000 || g.consumers.some((c) => (c.oldestPendingIdleMs ?? 0) > minIdleMs) || due > 0) return 'attention';
  return 'healthy';
}

export function worst(states: Health[]): Health {
  return states.includes('failing') ? 'failing' : states.includes('attention') ? 'attention' : 'healthy';
}
