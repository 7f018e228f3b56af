import type { LoggerService } from '@nestjs/common';
import type { Deserializer } from '@nestjs/microservices';
import { decodeEntry, EntryDecodeError, type DecodedEntry } from '../codec/entry-codec.js';
import { RedisStreamsContext } from '../context.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { DeliverySource, StreamEntry } from '../redis/stream-entry.js';
import type { SettledEvent } from '../server/events.js';

/**
 * Runs the handler for `pattern` (and, for a request, writes its replies); resolves when the
 * entry may be acked, rejects when it must stay pending.
 */
export type Dispatch = (pattern: string, entry: DecodedEntry, context: RedisStreamsContext) => Promise<void>;

export interface SettleDeps {
  commands: StreamCommands;
  dispatch: Dispatch;
  deserializer: Deserializer<string, unknown>;
  group: string;
  consumer: string;
  keyPrefix: string;
  logger: LoggerService;
  onSettled: (event: SettledEvent) => void;
}

/**
 * One entry: decode → dispatch → XACK on success, or leave it pending (it returns through
 * reclaim). Handler failures are reported, never thrown; only a failing XACK (Redis down)
 * rejects, and then the entry is still pending under this consumer, so nothing is lost.
 */
export async function settle(deps: SettleDeps, entry: StreamEntry, source: DeliverySource): Promise<SettledEvent> {
  const base = { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source };
  let decoded: DecodedEntry;
  try {
    decoded = await decodeEntry(entry, deps.deserializer);
  } catch (error) {
    const reason = error instanceof EntryDecodeError ? error.message : String(error);
    deps.logger.error(`${reason}; left pending (delivery ${entry.deliveryCount})`);
    return report(deps, { ...base, outcome: 'undecodable', error });
  }
  const pattern = entry.stream.slice(deps.keyPrefix.length);
  const context = new RedisStreamsContext({
    stream: entry.stream,
    pattern,
    id: entry.id,
    group: deps.group,
    consumer: deps.consumer,
    deliveryCount: entry.deliveryCount,
    fields: decoded.fields,
    headers: decoded.headers,
  });
  try {
    await deps.dispatch(pattern, decoded, context);
  } catch (error) {
    deps.logger.error(
      `handler for stream "${entry.stream}" failed on entry ${entry.id} (delivery ${entry.deliveryCount}): ${describe(error)}; left pending`,
    );
    return report(deps, { ...base, outcome: 'failed', error });
  }
  await deps.commands.ack(entry.stream, [entry.id]);
  return report(deps, { ...base, outcome: 'acked' });
}

function report(deps: SettleDeps, event: SettledEvent): SettledEvent {
  deps.onSettled(event);
  return event;
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
