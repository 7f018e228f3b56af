import { metrics } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { checkReadiness } from 'nestjs-redis-streams';
import { inspectStreams } from '../libs/redis-streams/src/ops/stream-reports.js';
import { disableOtelGlobals, PullReader } from './support/otel.js';
import { startReplicated, type ReplicatedRedis } from './support/redis-replica.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

// Redis 7.0 replicates a group's reads without `entries-read`: a promoted replica reports a lag
// that never returns to 0 (Valkey 8 replicates it). What the transport reports must not depend on it.

const reader = new PullReader();
let pair: ReplicatedRedis;
beforeAll(async () => {
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  pair = await startReplicated();
});
afterAll(async () => {
  disableOtelGlobals();
  await pair?.stop();
});

const start = useApps();

async function lagGauge(stream: string): Promise<number | undefined> {
  const { resourceMetrics } = await reader.collect();
  const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'messaging.redis_streams.lag');
  return metric?.dataPoints.find((p) => p.attributes['messaging.destination.name'] === stream)?.value as number | undefined;
}

describe('lag after a failover', () => {
  it('every entry handled on the old master: health, readiness, the lag gauge and inspect report the true lag on the promoted replica', async () => {
    const prefix = uniquePrefix();
    const options = { group: 'g', keyPrefix: prefix, blockMs: 50, batchSize: 1, readAhead: false };
    const first = await start({ connection: pair.master.url, ...options });
    const key = first.key();
    const admin = pair.master.client();
    const handled = async (count: number) =>
      waitFor(
        async () =>
          first.recorder.calls.length === count &&
          (await first.server.health({ maxStatsAgeMs: 0 })).streams.find((s) => s.stream === key)?.pending === 0,
        {
          message: `${count} entries handled and acked on the master`,
        },
      );
    // 100 entries handled before the replica exists: its full sync (an RDB) carries the group's entries-read.
    for (let n = 0; n < 100; n++) await admin.xadd(key, '*', 'n', String(n));
    await handled(100);
    await pair.addReplica();
    // 300 more handled while it replicates: Redis 7.0 sends the reads without entries-read.
    for (let n = 100; n < 400; n++) await admin.xadd(key, '*', 'n', String(n));
    await handled(400);
    await first.close();
    await pair.synced();
    await pair.failover();

    // 5 new entries on the promoted node, the first of them held by the handler: 4 still to deliver.
    const promoted = pair.replica.client();
    for (let n = 0; n < 5; n++) await promoted.xadd(key, '*', 'n', `after-${n}`);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const second = await start({ connection: pair.replica.url, ...options });
    second.recorder.behavior = () => released;
    try {
      await waitFor(() => second.recorder.calls.length === 1, { message: 'an entry in hand on the promoted node' });
      const held = await second.server.health({ maxStatsAgeMs: 0 });
      expect(held.streams.filter((s) => s.stream === key).map((s) => [s.lag, s.pending])).toEqual([[4, 1]]);
      expect((await inspectStreams(promoted, [key], 'g'))[0]!.groups[0]!.lag).toBe(4);
    } finally {
      release(); // before afterEach closes the app, which waits for the entry in hand
    }

    const drained = await waitFor(
      async () => {
        const h = await second.server.health({ maxStatsAgeMs: 0 });
        // Lag too: under load the stats read can fall between the last XREADGROUP and its reply (seen once on Valkey).
        const stream = h.streams.find((s) => s.stream === key);
        return second.recorder.calls.length === 5 && stream?.pending === 0 && stream.lag === 0 && h;
      },
      { message: 'the 5 new entries handled and acked' },
    );
    expect(drained.streams.filter((s) => s.stream === key).map((s) => s.lag)).toEqual([0]);
    expect(checkReadiness(drained, { maxLag: 10 })).toEqual({ up: true, reasons: [] });
    expect(await lagGauge(key)).toBe(0);
    const [report] = await inspectStreams(promoted, [key], 'g');
    expect(report!.groups.map((g) => [g.lag, g.pending])).toEqual([[0, 0]]);
  });
});
