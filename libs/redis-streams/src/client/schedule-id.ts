import { randomBytes } from 'node:crypto';

let last = 0;
let sequence = 0;
const processTag = randomBytes(4).toString('hex');

/**
 * A new scheduled entry's id: `<ms><sequence>-<process>` in base 36, fixed width, so that the ids
 * of one producer sort in the order it wrote them (entries due in the same ms are promoted in id
 * order: a key's entries stay in order) and two producers never make the same.
 */
export function newScheduleId(): string {
  const now = Math.max(Date.now(), last);
  sequence = now === last ? sequence + 1 : 0;
  last = now;
  return `${now.toString(36).padStart(9, '0')}${sequence.toString(36).padStart(5, '0')}-${processTag}`;
}
