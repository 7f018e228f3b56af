import { fieldsToRecord } from './entry-codec.js';

/** A dead-lettered entry: where it came from, what it held and why it was given up on. */
export interface DeadLetter {
  /** Id in the dead-letter stream. */
  id?: string;
  /** Source stream key and the entry's id there. */
  stream: string;
  sourceId: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  /** Why: the last handler error, or the decoding / size / delivery-limit reason. */
  error: string;
  /** The entry's field/value pairs, in their original order. */
  fields: string[];
  /** When it was dead-lettered (ms since epoch). */
  deadAt: number;
}

/** Dead-letter entry fields; `fields` holds the original pairs as a JSON array, so order and names survive. */
export function encodeDeadLetter(d: DeadLetter): string[] {
  return [
    'stream', d.stream,
    'sourceId', d.sourceId,
    'group', d.group,
    'consumer', d.consumer,
    'deliveryCount', String(d.deliveryCount),
    'error', d.error,
    'fields', JSON.stringify(d.fields),
    'deadAt', String(d.deadAt),
  ];
}

export function decodeDeadLetter(id: string, raw: readonly string[] | null): DeadLetter {
  const f = fieldsToRecord(raw ?? []);
  let fields: unknown;
  try {
    fields = JSON.parse(f.fields ?? '[]');
  } catch {
    fields = [];
  }
  return {
    id,
    stream: f.stream ?? '',
    sourceId: f.sourceId ?? '',
    group: f.group ?? '',
    consumer: f.consumer ?? '',
    deliveryCount: Number(f.deliveryCount ?? 0),
    error: f.error ?? '',
    fields: Array.isArray(fields) ? fields.map(String) : [],
    deadAt: Number(f.deadAt ?? 0),
  };
}
