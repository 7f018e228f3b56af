import { FIELD } from './wire-format.js';
import type { StreamEntry } from '../stream-entry.js';

/**
 * The key an ordered pattern keeps in order: the entry's `partitionKey` field. An entry without
 * one (a raw producer's) is its own key, ordered with nothing: the `\0` keeps that apart from
 * any key a producer writes (Redis values are binary-safe, but no client writes one with NUL).
 */
export function orderingKeyOf(entry: StreamEntry): string {
  const fields = entry.fields;
  if (fields) {
    // The last one wins, as a record of the fields would have it.
    for (let i = fields.length - 2; i >= 0; i -= 2) if (fields[i] === FIELD.partitionKey) return fields[i + 1]!;
  }
  return `\0${entry.stream}\0${entry.id}`;
}
