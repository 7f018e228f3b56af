import type { Deserializer } from '@nestjs/microservices';
import type { StreamEntry } from '../redis/stream-entry.js';
import { FIELD } from './wire-format.js';

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

export interface DecodedEntry {
  payload: unknown;
  fields: Record<string, string>;
  headers: Record<string, string>;
  /** Set when the entry is a request (`send`): where and under which id to reply. */
  request?: { correlationId: string; replyTo: string };
}

/** Field list → object; `Object.fromEntries` defines own properties, so a field named `__proto__` stays data. */
export function fieldsToRecord(fields: readonly string[]): Record<string, string> {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) pairs.push([fields[i]!, fields[i + 1]!]);
  return Object.fromEntries(pairs);
}

/**
 * Entry → handler payload. With a `data` field: its deserialized value (what our client
 * writes). Without: the field map as a plain object (what `XADD orders * order_id 1001` writes).
 */
export async function decodeEntry(entry: StreamEntry, deserializer: Deserializer<string, unknown>): Promise<DecodedEntry> {
  const fail = (reason: string) => new EntryDecodeError(entry.stream, entry.id, reason);
  if (entry.fields === null) throw fail('the entry was deleted from the stream');
  if (entry.fields.length === 0) throw fail('the entry has no fields');
  const fields = fieldsToRecord(entry.fields);
  if (!Object.hasOwn(fields, FIELD.data)) return { payload: { ...fields }, fields, headers: {} };

  let payload: unknown;
  try {
    payload = await deserializer.deserialize(fields[FIELD.data]!, { channel: entry.stream });
  } catch (err) {
    throw fail(`field "${FIELD.data}" cannot be deserialized (${err instanceof Error ? err.message : String(err)})`);
  }
  const headers = parseHeaders(fields[FIELD.headers], fail);
  const correlationId = fields[FIELD.correlationId];
  const replyTo = fields[FIELD.replyTo];
  const request = correlationId && replyTo ? { correlationId, replyTo } : undefined;
  return { payload, fields, headers, ...(request ? { request } : {}) };
}

function parseHeaders(raw: string | undefined, fail: (reason: string) => Error): Record<string, string> {
  if (raw === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw fail(`field "${FIELD.headers}" is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string')) {
    throw fail(`field "${FIELD.headers}" must be a JSON object of strings`);
  }
  return parsed as Record<string, string>;
}
