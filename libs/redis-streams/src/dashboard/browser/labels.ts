/* States the server reports, in words: a pending entry's, and an ordered partition's durable acks. */
import type { Durability } from './api-replies.js';
import { age } from './format.js';

/** What a pending entry waits for, in words. */
export function pelStateLabel(state: string): string {
  const labels: Record<string, string> = {
    'retry-waiting': 'waiting for its retry',
    'retry-due': 'retry due',
    live: 'held by a live handler',
    'consumer-gone': 'consumer gone',
  };
  return labels[state] ?? 'unknown';
}

/** An ordered partition's durable acks, in words (its owner's last word: see AckDurability). */
export function durabilityLabel(d: Durability): string {
  const wanted = `${d.replicas} replica(s)${d.fsync ? ', fsynced' : ''}`;
  const got = d.refused ? `the wait refused: ${d.refused}` : `${d.confirmed ?? 0} of ${d.replicas} confirmed`;
  const since = age(Math.max(0, Date.now() - d.since));
  if (d.state === 'held') return ` Durable acks HELD for ${since}: ${got}; nothing starts until the replicas confirm.`;
  if (d.state === 'degraded') return ` Durable acks DEGRADED for ${since}: ${got}; carrying on without waiting.`;
  if (d.state === 'confirmed') return ` Durable acks on ${wanted}: confirmed.`;
  return ` Durable acks on ${wanted}: not confirmed yet.`;
}
