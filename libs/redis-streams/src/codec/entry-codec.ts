import type { StreamEntry } from '../redis/stream-entry.js';

/** The field a JSON payload travels in; entries without it dispatch their field map. */
export const DATA_FIELD = 'data';

export class EntryDecodeError extends Error {
  constructor(
    readonly stream: string,
    readonly id: string,
    reason: string,
  ) {
    super(`cannot decode entry ${id} of stream "${stream}": ${reason}`);
    this.name = 'EntryDecodeError';
  }
}

/** Field list → object; `Object.fromEntries` defines own properties, so a field named `__proto__` stays data. */
export function fieldsToRecord(fields: readonly string[]): Record<string, string> {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) pairs.push([fields[i]!, fields[i + 1]!]);
  return Object.fromEntries(pairs);
}

/**
 * Entry → handler payload. With a `data` field: its JSON value (what our client writes).
 * Without: the field map as a plain object (what `XADD orders * order_id 1001` writes).
 */
export function decodeEntry(entry: StreamEntry): { payload: unknown; fields: Record<string, string> } {
  if (entry.fields === null) throw new EntryDecodeError(entry.stream, entry.id, 'the entry was deleted from the stream');
  if (entry.fields.length === 0) throw new EntryDecodeError(entry.stream, entry.id, 'the entry has no fields');
  const fields = fieldsToRecord(entry.fields);
  if (!Object.hasOwn(fields, DATA_FIELD)) return { payload: { ...fields }, fields };
  try {
    return { payload: JSON.parse(fields[DATA_FIELD]!), fields };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new EntryDecodeError(entry.stream, entry.id, `field "${DATA_FIELD}" is not valid JSON (${reason})`);
  }
}
