/* How far a trim may go: the stream's oldest entry against the oldest one a group still needs (pending or not yet delivered). */
import type { StreamRow } from './api-replies.js';
import { el, type Child } from './dom.js';
import { age, idAge } from './format.js';

/** Stream ids in order (`<ms>-<seq>`, each part compared as a number). */
function byId(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  return am! === bm! ? (as! < bs! ? -1 : as! > bs! ? 1 : 0) : am! < bm! ? -1 : 1;
}

export function headroom(s: StreamRow): Child {
  const needed = s.groups
    .flatMap((g) => [g.oldestPending?.id, g.firstUndeliveredId])
    .filter((id): id is string => Boolean(id))
    .sort(byId)[0];
  const since = (id: string) => age(idAge(id));
  if (!s.firstEntryId) return el('p', {}, 'Trim headroom: the stream is empty.');
  if (!needed)
    return el('p', {}, `Trim headroom: no group needs any entry; the oldest is ${s.firstEntryId} (${since(s.firstEntryId)} old).`);
  return el(
    'p',
    {},
    `Trim headroom: the oldest entry is ${s.firstEntryId} (${since(s.firstEntryId)} old); the oldest a group still needs is ${needed} (${since(needed)} old). A trim (MAXLEN, MINID) past ${needed} loses work.`,
  );
}
