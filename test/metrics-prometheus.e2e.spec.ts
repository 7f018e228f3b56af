import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { lastValueFrom } from 'rxjs';
import { useProducers } from './support/producer.js';
import { deadLetterKey } from './support/redis-server.js';
import { consumerOptions } from './support/consumer-options.js';
import { CORE_HOST, retryLater, uniquePrefix, useApps } from './support/test-app.js';
import { RateLimitedException } from 'nestjs-redis-streams';
import { RateLimitedError } from 'nestjs-redis-streams/core';

const rateLimited = (ms: number): Error => (CORE_HOST ? new RateLimitedError(ms) : new RateLimitedException(ms));
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

// Issue 35, item 5: the metrics as Prometheus scrapes them follow its conventions (one prefix, base
// units named in the name, `_total` on counters), whatever exporter turns them into text: the
// in-process PrometheusExporter (which adds `_total` only) and the Collector's (which adds the unit
// suffix unless the name carries it) agree on these names. The docs' alert rules and Grafana
// dashboard name only metrics that exist.

const redis = useRedis();
const start = useApps();
const producer = useProducers();

const exporter = new PrometheusExporter({ preventServerStart: true });
const meterProvider = new MeterProvider({ readers: [exporter] });
let scrapes: Server;
let scrapeUrl: string;

beforeAll(async () => {
  metrics.setGlobalMeterProvider(meterProvider);
  scrapes = createServer((req, res) => exporter.getMetricsRequestHandler(req, res));
  await new Promise<void>((resolve) => scrapes.listen(0, '127.0.0.1', resolve));
  scrapeUrl = `http://127.0.0.1:${(scrapes.address() as AddressInfo).port}/metrics`;
});
afterAll(async () => {
  await new Promise((resolve) => scrapes.close(resolve));
  await meterProvider.shutdown();
  metrics.disable();
});

const scrape = async () => (await fetch(scrapeUrl)).text();

/** Each metric family of the scrape: its name, type and unit (`# TYPE`, `# UNIT`). */
function families(text: string): Map<string, { type: string; unit?: string }> {
  const found = new Map<string, { type: string; unit?: string }>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) found.set(name!, { type: type! });
  for (const [, name, unit] of text.matchAll(/^# UNIT (\S+) (\S+)$/gm)) found.get(name!)!.unit = unit;
  return found;
}

/** The metric names a PromQL text uses: those of this transport. */
const namesIn = (text: string) => new Set([...text.matchAll(/\bmessaging_redis_streams_[a-z_]+/g)].map(([name]) => name));

/** A histogram's or counter's family name from a sample name. */
const familyOf = (name: string) => name.replace(/_(bucket|sum|count)$/, '');

describe('metrics as Prometheus scrapes them', () => {
  it('one prefix, _seconds on durations, _total on counters; the dead-letter backlog per stream; the producer sent, failed and its duration', async () => {
    const prefix = uniquePrefix();
    const app = await start(
      consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, maxDeliveries: 2, retry: { backoff: { type: 'fixed', delayMs: 20 } } }),
    );
    // Every fourth entry fails twice: one retry (a retry delay), then a dead letter.
    app.recorder.behavior = (call) => {
      if ((call.payload as { n: number }).n % 4 === 0) throw new Error('poison');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    for (let n = 1; n <= 12; n++) await lastValueFrom(client.emit('orders', { n }));
    // A write Redis refuses: a key of another type.
    await redis.client().set(`${prefix}refused`, 'not a stream');
    await expect(lastValueFrom(client.emit('refused', { n: 0 }))).rejects.toThrow(/WRONGTYPE/);
    await waitFor(() => app.settled.filter((e) => e.outcome !== 'failed').length === 12, { message: 'every entry acked or dead-lettered' });
    const dead = await redis.client().xlen(deadLetterKey(app.key()));
    expect(dead).toBe(3);

    const text = await waitFor(
      async () => {
        const t = await scrape();
        return (
          new RegExp(`^messaging_redis_streams_dead_letters\\{[^}]*messaging_destination_name="${app.key()}"[^}]*\\} 3$`, 'm').test(t) && t
        );
      },
      { message: 'the dead-letter gauge at 3' },
    );
    const ours = [...families(text)].filter(([name]) => !name.startsWith('target_info'));
    // One prefix: nothing of the transport's outside it.
    expect(ours.map(([name]) => name).filter((name) => !name.startsWith('messaging_redis_streams_'))).toEqual([]);
    for (const [name, { type, unit }] of ours) {
      if (type === 'counter') expect(name, `${name}: a counter`).toMatch(/_total$/);
      if (unit === 's') expect(name, `${name}: in seconds`).toMatch(/_seconds$/);
      expect(unit, `${name}: base units`).not.toMatch(/^(ms|us|ns|min|h)$/);
    }
    expect(Object.fromEntries(ours.map(([name, { type }]) => [name, type]))).toMatchObject({
      messaging_redis_streams_process_duration_seconds: 'histogram',
      messaging_redis_streams_consumed_messages_total: 'counter',
      messaging_redis_streams_retry_delay_seconds: 'histogram',
      messaging_redis_streams_lag: 'gauge',
      messaging_redis_streams_pending: 'gauge',
      messaging_redis_streams_dead_letters: 'gauge',
      messaging_redis_streams_stats_age_seconds: 'gauge',
      messaging_redis_streams_stuck: 'gauge',
      messaging_redis_streams_handler_oldest_age_seconds: 'gauge',
      messaging_redis_streams_sent_messages_total: 'counter',
      messaging_redis_streams_send_duration_seconds: 'histogram',
    });
    const on = (stream: string) => `messaging_destination_name="${stream}"`;
    const sample = (name: string, ...labels: string[]) =>
      text
        .split('\n')
        .find((l) => l.startsWith(`${name}{`) && labels.every((label) => l.includes(label)))
        ?.split(' ')
        .at(-1);
    expect(sample('messaging_redis_streams_sent_messages_total', on(app.key()), 'messaging_redis_streams_outcome="sent"')).toBe('12');
    expect(sample('messaging_redis_streams_sent_messages_total', on(`${prefix}refused`), 'messaging_redis_streams_outcome="failed"')).toBe(
      '1',
    );
    expect(sample('messaging_redis_streams_send_duration_seconds_count', on(app.key()))).toBe('12');
    expect(sample('messaging_redis_streams_consumed_messages_total', on(app.key()), 'messaging_redis_streams_outcome="acked"')).toBe('9');

    // The docs' alert rules and Grafana dashboard: every metric they query is in the scrape, and every
    // label of the transport's they name is one its samples carry.
    const exported = new Set(ours.map(([name]) => name));
    const labels = new Set([...text.matchAll(/[{,]([a-z_]+)="/g)].map(([, label]) => label!));
    for (const doc of ['docs/monitoring/alerts.yml', 'docs/monitoring/grafana-dashboard.json']) {
      const used = [...namesIn(readFileSync(new URL(`../${doc}`, import.meta.url), 'utf8'))];
      const metricsUsed = used.filter((name) => !labels.has(name));
      expect(metricsUsed.length, doc).toBeGreaterThan(3);
      expect(
        metricsUsed.filter((name) => !exported.has(familyOf(name))),
        `${doc} queries metrics that do not exist`,
      ).toEqual([]);
    }
  });

  it('an entry that waits for a rate limit or whose handler asked for a later try is its own outcome, not a failure (issue 51)', async () => {
    const prefix = uniquePrefix();
    const app = await start(consumerOptions(redis, { keyPrefix: prefix, blockMs: 50, retry: { backoff: { type: 'fixed', delayMs: 20 } } }));
    // Each throws once (a rate-limited wait costs no delivery: the count cannot tell its second try).
    const thrown = new Set<number>();
    app.recorder.behavior = (call) => {
      const { n } = call.payload as { n: number };
      if (thrown.has(n)) return;
      thrown.add(n);
      if (n === 1) throw rateLimited(50);
      if (n === 2) throw retryLater(50);
      if (n === 3) throw new Error('boom');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: prefix });
    for (let n = 1; n <= 4; n++) await lastValueFrom(client.emit('orders', { n }));
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 4, { message: 'all 4 acked in the end' });
    const outcome = (value: string) =>
      waitFor(
        async () =>
          (await scrape())
            .split('\n')
            .find(
              (l) =>
                l.startsWith('messaging_redis_streams_consumed_messages_total{') &&
                l.includes(`messaging_destination_name="${app.key()}"`) &&
                l.includes(`messaging_redis_streams_outcome="${value}"`),
            )
            ?.split(' ')
            .at(-1),
        { message: `a sample of outcome ${value}` },
      );
    expect(await outcome('rate-limited')).toBe('1');
    expect(await outcome('retry-requested')).toBe('1');
    expect(await outcome('failed')).toBe('1');
    expect(await outcome('acked')).toBe('4');
  });
});
