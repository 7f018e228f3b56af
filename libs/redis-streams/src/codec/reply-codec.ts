import type { Deserializer, Serializer, WritePacket } from '../ports.js';
import { fieldsToRecord } from './entry-codec.js';
import { FIELD } from './wire-format.js';

/**
 * A reply entry: `correlationId`, then `data` (a value), `err` (JSON of the error) and/or
 * `done` ('1' on the last reply of the request).
 */
export async function encodeReply(correlationId: string, packet: WritePacket, serializer: Serializer<unknown, string>): Promise<string[]> {
  const fields: string[] = [FIELD.correlationId, correlationId];
  if (packet.err !== undefined) fields.push(FIELD.err, encodeError(packet.err));
  else if (packet.response !== undefined) {
    let data: string;
    try {
      data = await serializer.serialize(packet.response);
    } catch (cause) {
      throw new UnserializableResult(cause);
    }
    fields.push(FIELD.data, data);
  }
  if (packet.isDisposed) fields.push(FIELD.done, '1');
  return fields;
}

/**
 * The serializer refused a request handler's value (a BigInt, a cycle): the handler's outcome,
 * not Redis' failure. `reply` is what the caller is answered with instead.
 */
export class UnserializableResult extends Error {
  readonly reply: Error;

  constructor(cause: unknown) {
    super(`the handler's result could not be serialized: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'UnserializableResult';
    this.reply = new Error(this.message);
  }
}

export async function decodeReply(
  fields: readonly string[] | null,
  deserializer: Deserializer<string, unknown>,
): Promise<{ correlationId: string; packet: WritePacket } | undefined> {
  if (!fields) return undefined;
  const f = fieldsToRecord(fields);
  const correlationId = f[FIELD.correlationId];
  if (!correlationId) return undefined;
  const packet: WritePacket = { isDisposed: f[FIELD.done] === '1' };
  const err = f[FIELD.err];
  const data = f[FIELD.data];
  try {
    if (err !== undefined) packet.err = JSON.parse(err);
    else if (data !== undefined) packet.response = await deserializer.deserialize(data);
  } catch (cause) {
    // The caller is waiting: tell it, rather than letting it time out.
    return {
      correlationId,
      packet: { err: new Error(`unreadable reply: ${cause instanceof Error ? cause.message : String(cause)}`), isDisposed: true },
    };
  }
  return { correlationId, packet };
}

/** Nest hands errors over as `{ status, message }` objects or `RpcException` payloads; an `Error` keeps its message. */
function errorToJson(err: unknown): unknown {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return err;
}

/** The error as JSON; one JSON cannot hold (an RpcException carrying a BigInt) still answers the caller. */
function encodeError(err: unknown): string {
  try {
    const text = JSON.stringify(errorToJson(err));
    if (text !== undefined) return text;
  } catch (cause) {
    return JSON.stringify({
      name: 'Error',
      message: `the handler's error could not be serialized: ${cause instanceof Error ? cause.message : String(cause)}`,
    });
  }
  return JSON.stringify({ name: 'Error', message: `the handler's error could not be serialized: ${typeof err}` });
}
