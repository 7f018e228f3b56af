import { brand } from '../brand.js';
import type { Deserializer } from '../ports.js';
import type { StreamEntry } from '../stream-entry.js';
import { FIELD } from './wire-format.js';

export class EntryDecodeError extends Error {
  constructor(
    readonly stream: string,
    readonly id: string,
    /** What is wrong with it, without the entry's id and stream (a log line names them already). */
    readonly reason: string,
  ) {
    super(`cannot decode entry ${id} of stream "${stream}": ${reason}`);
    this.name = 'EntryDecodeError';
  }
}
brand(EntryDecodeError, 'EntryDecodeError');

export interface DecodedEntry {
  payload: unknown;
  headers: Record<string, string>;
  /** Set when the entry is a request (`send`): where and under which id to reply. */
  request: { correlationId: string; replyTo: string } | undefined;
}

/** Field list → object. A field named `__proto__` is defined as an own property, so it stays data. */
export function fieldsToRecord(fields: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!;
    if (name === '__proto__')
      Object.defineProperty(record, name, { value: fields[i + 1], enumerable: true, writable: true, configurable: true });
    else record[name] = fields[i + 1]!;
  }
  return record;
}

/**
 * Entry → handler payload. With a `data` field: its deserialized value (what our client
 * writes). Without: the field map as a plain object (what `XADD orders * order_id 1001` writes).
 */
export function decodeEntry(entry: StreamEntry, deserializer: Deserializer<string, unknown>): DecodedEntry | Promise<DecodedEntry> {
  if (entry.fields === null) throw new EntryDecodeError(entry.stream, entry.id, 'the entry was deleted from the stream');
  if (entry.fields.length === 0) throw new EntryDecodeError(entry.stream, entry.id, 'the entry has no fields');
  const known = knownFields(entry.fields);
  if (known.data === undefined) return { payload: fieldsToRecord(entry.fields), headers: NO_HEADERS, request: undefined };

  // Read out of the shared result before anything else can scan.
  const { data, correlationId, replyTo } = known;
  const headers = parseHeaders(entry, known.headers);
  const request = correlationId && replyTo ? { correlationId, replyTo } : undefined;
  let payload: unknown;
  try {
    payload = deserializer.deserialize(data, { channel: entry.stream });
  } catch (err) {
    throw cannotDeserialize(entry, err);
  }
  // Synchronous deserializers (the JSON default) skip a promise per entry.
  if (payload instanceof Promise) {
    return payload.then(
      (value: unknown) => ({ payload: value, headers, request }),
      (err: unknown) => {
        throw cannotDeserialize(entry, err);
      },
    );
  }
  return { payload, headers, request };
}

interface KnownFields {
  data: string | undefined;
  headers: string | undefined;
  correlationId: string | undefined;
  replyTo: string | undefined;
}

/** knownFields' result: one object, overwritten by each call (read it before the next; nothing between is asynchronous). */
const scanned: KnownFields = { data: undefined, headers: undefined, correlationId: undefined, replyTo: undefined };

/**
 * The fields this package gives a meaning to, in one pass over the list (no record per entry:
 * `ctx.getFields()` builds one only when asked). A repeated name keeps its last value, as a
 * record would. Returns a shared object: no allocation per entry.
 */
function knownFields(fields: readonly string[]): Readonly<KnownFields> {
  scanned.data = scanned.headers = scanned.correlationId = scanned.replyTo = undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1];
    switch (fields[i]) {
      case FIELD.data:
        scanned.data = value;
        break;
      case FIELD.headers:
        scanned.headers = value;
        break;
      case FIELD.correlationId:
        scanned.correlationId = value;
        break;
      case FIELD.replyTo:
        scanned.replyTo = value;
        break;
    }
  }
  return scanned;
}

/**
 * The producer's headers of an entry that is not decoded (refused first: too large, delivered too
 * often), for its trace span; undefined when absent, malformed, or longer than `maxChars`.
 */
export function headersOf(entry: StreamEntry, maxChars: number): Record<string, string> | undefined {
  const raw = knownFields(entry.fields ?? []).headers;
  if (raw === undefined || raw.length > maxChars) return undefined;
  try {
    return parseHeaders(entry, raw);
  } catch {
    return undefined;
  }
}

/** Shared, frozen: entries without headers all get this one (no allocation per entry). */
const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function cannotDeserialize(entry: StreamEntry, err: unknown): EntryDecodeError {
  return new EntryDecodeError(
    entry.stream,
    entry.id,
    `field "${FIELD.data}" cannot be deserialized (${err instanceof Error ? err.message : String(err)})`,
  );
}

function parseHeaders(entry: StreamEntry, raw: string | undefined): Record<string, string> {
  if (raw === undefined) return NO_HEADERS;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new EntryDecodeError(entry.stream, entry.id, `field "${FIELD.headers}" is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string')) {
    throw new EntryDecodeError(entry.stream, entry.id, `field "${FIELD.headers}" must be a JSON object of strings`);
  }
  return parsed as Record<string, string>;
}
