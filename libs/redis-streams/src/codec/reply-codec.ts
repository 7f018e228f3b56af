import type { Deserializer, Serializer, WritePacket } from '@nestjs/microservices';
import { fieldsToRecord } from './entry-codec.js';
import { FIELD } from './wire-format.js';

/**
 * A reply entry: `correlationId`, then `data` (a value), `err` (JSON of the error) and/or
 * `done` ('1' on the last reply of the request).
 */
export async function encodeReply(correlationId: string, packet: WritePacket, serializer: Serializer<unknown, string>): Promise<string[]> {
  const fields: string[] = [FIELD.correlationId, correlationId];
  if (packet.err !== undefined) fields.push(FIELD.err, JSON.stringify(errorToJson(packet.err)));
  else if (packet.response !== undefined) fields.push(FIELD.data, await serializer.serialize(packet.response));
  if (packet.isDisposed) fields.push(FIELD.done, '1');
  return fields;
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
    return { correlationId, packet: { err: new Error(`unreadable reply: ${cause instanceof Error ? cause.message : String(cause)}`), isDisposed: true } };
  }
  return { correlationId, packet };
}

/** Nest hands errors over as `{ status, message }` objects or `RpcException` payloads; an `Error` keeps its message. */
function errorToJson(err: unknown): unknown {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return err;
}
