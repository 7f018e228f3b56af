import type { LoggerService } from '@nestjs/common';
import type { Deserializer } from '@nestjs/microservices';
import { encodeDeadLetter } from '../codec/dead-letter-codec.js';
import { decodeEntry, type DecodedEntry } from '../codec/entry-codec.js';
import { EntryContextArgs, RedisStreamsContext } from '../context.js';
import { isDeadLetter } from '../dead-letter.exception.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { DeliverySource, StreamEntry } from '../redis/stream-entry.js';
import type { SettledEvent } from '../server/events.js';

/**
 * Runs the handler for `pattern` (and, for a request, writes its replies); resolves when the
 * entry may be acked, rejects when it must stay pending.
 */
export type Dispatch = (pattern: string, entry: DecodedEntry, context: RedisStreamsContext) => Promise<unknown>;

export interface SettleDeps {
  commands: StreamCommands;
  dispatch: Dispatch;
  deserializer: Deserializer<string, unknown>;
  group: string;
  consumer: string;
  keyPrefix: string;
  maxDeliveries: number;
  deadLetterStream: ((stream: string) => string) | false;
  maxEntryBytes: number | undefined;
  handlerTimeoutMs: number | undefined;
  logger: LoggerService;
}

/**
 * One entry: decode → dispatch → `'acked'` on success (the batch settler sends the XACK); on
 * failure leave it pending (it returns through reclaim) or, when it can never succeed, move it
 * to the dead-letter stream. Handler failures are logged and returned, never thrown; only Redis
 * failing rejects, and then the entry is still pending under this consumer, so nothing is lost.
 */
export async function settle(deps: SettleDeps, entry: StreamEntry, source: DeliverySource): Promise<SettledEvent> {
  // Delivered again and again without ever being settled: its consumers died or timed out on it.
  if (entry.deliveryCount > deps.maxDeliveries) {
    return deadLetter(deps, entry, source, `delivered ${entry.deliveryCount} times (maxDeliveries ${deps.maxDeliveries}) without being settled`);
  }
  if (deps.maxEntryBytes !== undefined) {
    const bytes = entryBytes(entry);
    if (bytes > deps.maxEntryBytes) return deadLetter(deps, entry, source, `entry is ${bytes} bytes, above maxEntryBytes (${deps.maxEntryBytes})`);
  }
  let decoded: DecodedEntry;
  try {
    const decoding = decodeEntry(entry, deps.deserializer);
    decoded = decoding instanceof Promise ? await decoding : decoding;
  } catch (error) {
    return deadLetter(deps, entry, source, describe(error), error);
  }

  const pattern = entry.stream.slice(deps.keyPrefix.length);
  const context = new RedisStreamsContext(
    new EntryContextArgs(entry.stream, pattern, entry.id, deps.group, deps.consumer, entry.deliveryCount, decoded.headers, entry.fields!),
  );
  try {
    const work = deps.dispatch(pattern, decoded, context);
    await (deps.handlerTimeoutMs === undefined ? work : withTimeout(work, deps.handlerTimeoutMs));
  } catch (error) {
    if (isDeadLetter(error)) return deadLetter(deps, entry, source, `handler refused it: ${describe(error)}`, error);
    if (entry.deliveryCount >= deps.maxDeliveries) {
      return deadLetter(deps, entry, source, `handler failed on delivery ${entry.deliveryCount} of ${deps.maxDeliveries}: ${describe(error)}`, error);
    }
    deps.logger.error(
      `handler for stream "${entry.stream}" failed on entry ${entry.id} (delivery ${entry.deliveryCount} of ${deps.maxDeliveries}): ${describe(error)}; left pending`,
    );
    return { ...baseOf(entry, source), outcome: 'failed', error };
  }
  return { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source, outcome: 'acked' };
}

function baseOf(entry: StreamEntry, source: DeliverySource): Omit<SettledEvent, 'outcome'> {
  return { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source };
}

/** Moves the entry to its dead-letter stream and acks it (one atomic step), or leaves it pending when that is disabled. */
async function deadLetter(
  deps: SettleDeps,
  entry: StreamEntry,
  source: DeliverySource,
  reason: string,
  error: unknown = new Error(reason),
): Promise<SettledEvent> {
  const base = baseOf(entry, source);
  const where = `entry ${entry.id} of stream "${entry.stream}" (delivery ${entry.deliveryCount})`;
  if (!deps.deadLetterStream) {
    deps.logger.error(`${where}: ${reason}; dead-lettering is disabled, left pending`);
    return { ...base, outcome: 'failed', error };
  }
  const deadStream = deps.deadLetterStream(entry.stream);
  const fields = encodeDeadLetter({
    stream: entry.stream,
    sourceId: entry.id,
    group: deps.group,
    consumer: deps.consumer,
    deliveryCount: entry.deliveryCount,
    error: reason,
    fields: [...(entry.fields ?? [])],
    deadAt: Date.now(),
  });
  const deadId = await deps.commands.deadLetter(entry.stream, deadStream, deps.consumer, entry.id, fields);
  if (deadId === null) {
    // A peer reclaimed it (our lease lapsed) or it was acked: it is theirs to settle now.
    deps.logger.warn(`${where}: not dead-lettered, this consumer no longer owns it`);
    return { ...base, outcome: 'failed', error };
  }
  deps.logger.error(`${where}: ${reason}; moved to "${deadStream}" as ${deadId}`);
  return { ...base, outcome: 'dead-lettered', error, deadLetterId: deadId };
}

function entryBytes(entry: StreamEntry): number {
  let bytes = 0;
  for (const part of entry.fields ?? []) bytes += Buffer.byteLength(part);
  return bytes;
}

/** The handler keeps running after a timeout (JS cannot cancel it); only its outcome is ignored. */
function withTimeout(work: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`handler timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}

/** Nest turns handler errors into `{ status, message }` objects; print those readably. */
export function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'message' in error) return String((error as { message: unknown }).message);
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}
