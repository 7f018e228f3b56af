import type { ConnectionOption } from 'nestjs-redis-streams';
import { StreamConsumer, type StreamConsumerOptions } from 'nestjs-redis-streams/core';

/**
 * The consumer the durable-acks suites run (one node with its replica, and a cluster): StreamConsumer `a` of
 * group `g` on `prefix`, concurrency 4, minIdleMs 3000, leaseRenewMs 500, no log; `options` over those.
 * Pushed to `consumers` (the file's useLeftoversAfterEach closes them).
 */
export function durableAcksConsumer(
  consumers: { close(): Promise<void> }[],
  connection: ConnectionOption,
  prefix: string,
  options: StreamConsumerOptions = {},
): StreamConsumer {
  const c = new StreamConsumer({
    connection,
    group: 'g',
    consumer: 'a',
    blockMs: 100,
    minIdleMs: 3000,
    leaseRenewMs: 500,
    keyPrefix: prefix,
    concurrency: 4,
    logger: false,
    ...options,
  });
  consumers.push(c);
  return c;
}
