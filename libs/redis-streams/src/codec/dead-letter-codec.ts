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

/**
 * Dead-letter entry fields but `fields`, which holds the original pairs as a JSON array (order
 * and names survive) and which the dead-letter script adds, copied byte for byte inside Redis
 * (stream-commands.ts): a value that is not UTF-8 never passes through a JavaScript string.
 */
export function encodeDeadLetterHead(d: Omit<DeadLetter, 'fields'>): string[] {
  return [
    'stream',
    d.stream,
    'sourceId',
    d.sourceId,
    'group',
    d.group,
    'consumer',
    d.consumer,
    'deliveryCount',
    String(d.deliveryCount),
    'error',
    d.error,
    'deadAt',
    String(d.deadAt),
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
