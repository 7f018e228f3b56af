import type { LoggerService } from '@nestjs/common';
import { encodeDeadLetter } from '../codec/dead-letter-codec.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import type { StreamEntry } from '../redis/stream-entry.js';
import type { DeliverySource } from './settled-event.js';
import type { SettledEvent } from './settled-event.js';

export interface DeadLettererDeps {
  commands: StreamCommands;
  group: string;
  consumer: string;
  deadLetterStream: ((stream: string) => string) | false;
  logger: LoggerService;
}

/**
 * Moves the entry to its dead-letter stream and acks it (one atomic script), or leaves it
 * pending when dead-lettering is disabled. Rejects only when Redis failed (the entry is then
 * still pending under this consumer).
 */
export async function deadLetter(
  deps: DeadLettererDeps,
  entry: StreamEntry,
  source: DeliverySource,
  reason: string,
  error: unknown = new Error(reason),
): Promise<SettledEvent> {
  const base = { stream: entry.stream, id: entry.id, deliveryCount: entry.deliveryCount, source };
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
