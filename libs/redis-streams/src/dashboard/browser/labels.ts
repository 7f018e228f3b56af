/* States the server reports, in words: a pending entry's, and an ordered partition's durable acks. */
import type { ConsumerOrdering, Durability } from './api-replies.js';
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

/**
 * An ordered stream's lease as this app's consumer (`self`) last saw it, in words: the raw value is
 * `<epoch> <token> <consumer>`, the token naming a process (the same consumer name in another process is another owner).
 */
export function leaseWords(o: Pick<ConsumerOrdering, 'owned' | 'owner'>, self: string): string {
  const m = /^(\d+) (\S+) (.+)$/.exec(o.owner);
  if (o.owned) return m ? `owned here (epoch ${m[1]})` : 'owned here';
  if (o.owner === '') return 'standby: nobody owns it now';
  if (!m) return `standby: the lease reads "${o.owner}"`;
  return `standby: ${m[3]}${m[3] === self ? ' in another process' : ''} owns it (epoch ${m[1]})`;
}
