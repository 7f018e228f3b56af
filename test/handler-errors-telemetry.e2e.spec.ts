/**
 * Issue 22 item 3 (review): a handler's own error reaches spans and metrics masked, escaped and of
 * bounded cardinality; the exception event must not export a password its message quotes.
 */
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { useApps } from './support/test-app.js';
import { PullReader, useTracing } from './support/otel.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis({ standalone: true });
const reader = new PullReader();
const spans = useTracing({ reader });

const start = useApps();

describe("telemetry of a handler's own error", () => {
  it("the span's exception event has the message and stack masked and escaped", async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50, maxDeliveries: 1 }));
    app.recorder.behavior = () => {
      throw new Error('cannot reach redis://app:s3cretPW@127.0.0.1:1 \x1b[2J');
    };
    await redis.client().xadd(app.key(), '*', 'order_id', '7');
    await waitFor(() => spans.getFinishedSpans().some((s) => s.name === `process ${app.key()}`), { message: 'the process span' });
    const [span] = spans.getFinishedSpans().filter((s) => s.name === `process ${app.key()}`);
    const exception = span!.events.find((e) => e.name === 'exception')!.attributes!;
    expect(exception['exception.type']).toBe('Error');
    expect(exception['exception.message']).toBe('cannot reach redis://app:***@127.0.0.1:1 \\x1b[2J');
    expect(String(exception['exception.stacktrace'])).toMatch(/^Error: cannot reach redis:\/\/app:\*\*\*@127\.0\.0\.1:1 \\x1b\[2J\n\s+at /);
    expect(JSON.stringify(span!.events)).not.toContain('s3cretPW');
    expect(JSON.stringify(span!.events)).not.toContain('\u001b');
  });

  it('error.type on the metrics is the class name, escaped, with a bounded number of distinct values', async () => {
    const app = await start(consumerOptions(redis, { blockMs: 50, maxDeliveries: 1 }));
    app.recorder.behavior = (call) => {
      const n = Number(call.fields.n);
      throw Object.assign(new Error('declined'), { name: n === 0 ? 'Card\x1b[2JDeclined' : `Declined${n}` });
    };
    const total = 120;
    for (let n = 0; n < total; n++) await redis.client().xadd(app.key(), '*', 'n', String(n));
    await waitFor(() => app.settled.length === total, { message: `${total} entries settled` });
    const { resourceMetrics } = await reader.collect();
    const consumed = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === 'messaging.redis_streams.consumed.messages')!
      .dataPoints.filter((p) => p.attributes['messaging.destination.name'] === app.key());
    const types = consumed.map((p) => String(p.attributes['error.type']));
    expect(consumed.reduce((sum, p) => sum + Number(p.value), 0)).toBe(total);
    expect(types.length).toBeLessThanOrEqual(101);
    expect(types).toContain('_OTHER');
    expect(types).toContain('Card\\x1b[2JDeclined');
    expect(types.join('')).not.toContain('\u001b');
  });
});
