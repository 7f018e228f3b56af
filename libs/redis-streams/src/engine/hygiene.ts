import { ConsumerHygiene } from '../consumer/upkeep/consumer-hygiene.js';
import { escapeControl } from '../escape-control.js';
import { isCluster } from '../options/connection.js';
import type { ResolvedServerOptions } from '../options/server-options.js';
import type { Logger } from '../ports.js';
import { cleanupLockOf } from '../key-names.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { counted } from '../readable.js';

/** `consumerCleanup`: deletes consumers left behind, beside the loops; undefined when off. */
export function startHygiene(
  options: ResolvedServerOptions,
  streams: readonly string[],
  commands: StreamCommands,
  logger: Logger,
  onDeleted: (stream: string, names: string[]) => void,
): ConsumerHygiene | undefined {
  const { consumerCleanup, consumer, connection, group, blockMs } = options;
  if (!consumerCleanup) return undefined;
  if (consumerCleanup.idleMs <= 2 * blockMs) {
    // This transport's consumers are kept while connected (connected-consumers.ts); another client's
    // parked consumer is told by its idle time alone, which a park of blockMs reaches.
    logger.warn(
      `consumerCleanup.idleMs (${consumerCleanup.idleMs}) is not well above blockMs (${blockMs}): consumers of other clients (connections this transport did not name) parked that long are deleted too (and re-created by their next read)`,
    );
  }
  const hygiene = new ConsumerHygiene({
    streams,
    commands,
    consumer,
    ...consumerCleanup,
    // The lock shares its stream's slot (one script names both), like the dead-letter key.
    // Per group: two groups of one stream clean their own consumers on their own schedule.
    lockOf: (stream) => cleanupLockOf(stream, group, isCluster(connection)),
    onDeleted: (stream, names) => {
      logger.log(
        `deleted ${counted(names.length, 'consumer', 'consumers')} of group "${group}" on "${stream}" idle past ${consumerCleanup.idleMs} ms with nothing pending: ${names.map(escapeControl).join(', ')}`,
      );
      onDeleted(stream, names);
    },
    logger,
  });
  return hygiene;
}
