// node otel-calls.js '{"n":100000,"otelSampler":"parent"}': the telemetry section's yardstick. The calls that any
// consumer instrumentation following the messaging conventions makes per entry (extract the producer's
// context, start a CONSUMER span, run the handler in its context, end it, record messaging.redis_streams.process.duration_seconds),
// with the same SDK as the transport's variants and no transport, Redis or Nest: what the SDK and the context
// manager cost by themselves. Then the same calls with the ten attributes the transport gives a recorded span of an
// acked entry (the conventions' seven and its own three, set one by one as it does): what the SDK costs to take them.
// The first pass is cold, with the attributes (a fresh process, n entries, as the drain it is compared with: the
// SDK's code compiles during it as the transport's does during the drain); the others warm.
// Prints one JSON line: { coldUsPerEntry, cpuUsPerEntry, withAttributesUsPerEntry }.
// With `count` (bench/instructions.ts): the cold pass alone, its window marked for an instruction counter; prints
// { pid, majorGcs, windowMs }.
import { context, metrics, propagation, ROOT_CONTEXT, SpanKind, trace, type Span } from '@opentelemetry/api';
import { countWindow, type CountWindow } from './count-window.js';
import { registerOtelSdk, traceparentOf, type OtelSampler } from './otel-sdk.js';

const args = JSON.parse(process.argv[2]!) as { n: number; otelSampler: OtelSampler; count?: CountWindow };
await registerOtelSdk(args.otelSampler);
const tracer = trace.getTracer('otel-calls');
const duration = metrics.getMeter('otel-calls').createHistogram('messaging.redis_streams.process.duration_seconds', { unit: 's' });
// The transport's metric attributes (five), one object reused: the SDK hashes them on every record all the same.
const attrs = {
  'messaging.system': 'redis',
  'messaging.operation.name': 'process',
  'messaging.destination.name': 'orders',
  'messaging.consumer.group.name': 'bench',
  'messaging.redis_streams.outcome': 'acked',
};
const headers = Array.from({ length: args.n }, (_, i) => ({ traceparent: traceparentOf(i, 10) }));
const ids = Array.from({ length: args.n }, (_, i) => `1764806400000-${i}`);
const handler = async (): Promise<void> => {};

/** What the transport sets on a recorded span of an acked entry (telemetry/entry-trace.ts), one call each. */
function setAttributes(span: Span, i: number): void {
  span.setAttribute('messaging.system', 'redis');
  span.setAttribute('messaging.operation.name', 'process');
  span.setAttribute('messaging.operation.type', 'process');
  span.setAttribute('messaging.destination.name', 'orders');
  span.setAttribute('messaging.consumer.group.name', 'bench');
  span.setAttribute('messaging.client.id', 'c1');
  span.setAttribute('messaging.message.id', ids[i]!);
  span.setAttribute('messaging.redis_streams.delivery_count', 1);
  span.setAttribute('messaging.redis_streams.delivery_source', 'new');
  span.setAttribute('messaging.redis_streams.outcome', 'acked');
}

/** CPU µs per entry of one pass over the entries; `window` marked at its ends. */
async function pass(withAttributes: boolean, window?: ReturnType<typeof countWindow>): Promise<number> {
  const cpu = process.cpuUsage();
  for (let i = 0; i < args.n; i++) {
    // As the drain child marks its handler's from-th and to-th calls: before the entry after them.
    if (window && (i === window.from || i === window.to)) window.mark(i === window.from);
    const started = performance.now();
    const parent = propagation.extract(ROOT_CONTEXT, headers[i]);
    const span = tracer.startSpan('process orders', { kind: SpanKind.CONSUMER }, parent);
    if (withAttributes && span.isRecording()) setAttributes(span, i);
    await context.with(trace.setSpan(parent, span), handler);
    span.end();
    duration.record((performance.now() - started) / 1000, attrs);
  }
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / args.n;
}

if (args.count) {
  const window = countWindow(args.count, args.n);
  await pass(true, window);
  process.stdout.write(`${JSON.stringify({ pid: process.pid, majorGcs: window.majorGcs(), windowMs: window.ms() })}\n`, () =>
    process.exit(0),
  );
} else {
  // Cold: the like of a drain from a fresh process. Then each kind once more warm (the SDK's code compiled), measured.
  const coldUsPerEntry = await pass(true);
  await pass(false);
  const cpuUsPerEntry = await pass(false);
  const withAttributesUsPerEntry = await pass(true);
  process.stdout.write(`${JSON.stringify({ coldUsPerEntry, cpuUsPerEntry, withAttributesUsPerEntry })}\n`);
}
