import { FIELD } from './wire-format.js';
import type { StreamEntry } from '../stream-entry.js';

/**
 * The key an ordered pattern keeps in order: the entry's `partitionKey` field. An entry without
 * one (a raw producer's) is its own key, ordered with nothing: the `\0` keeps that apart from
 * any key a producer writes (Redis values are binary-safe, but no client writes one with NUL).
 */
export function orderingKeyOf(entry: StreamEntry): string {
  return partitionKeyFieldOf(entry) ?? `\0${entry.stream}\0${entry.id}`;
}

/** The entry's `partitionKey` field as it is (maybe ''); undefined when it has none. The last one wins, as a record of the fields would have it. */
export function partitionKeyFieldOf(entry: StreamEntry): string | undefined {
  const fields = entry.fields;
  if (fields) for (let i = fields.length - 2; i >= 0; i -= 2) if (fields[i] === FIELD.partitionKey) return fields[i + 1]!;
  return undefined;
}
