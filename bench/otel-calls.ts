// node otel-calls.js '{"n":100000,"otelSampler":"parent"}': the telemetry section's yardstick. The calls that any
// consumer instrumentation following the messaging conventions makes per entry (extract the producer's
// context, start a CONSUMER span, run the handler in its context, end it, record messaging.redis_streams.process.duration_seconds),
// with the same SDK as the transport's variants and no transport, Redis or Nest: what the SDK and the context
// manager cost by themselves. Prints one JSON line: { cpuUsPerEntry }.
import { context, metrics, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { registerOtelSdk, traceparentOf, type OtelSampler } from './otel-sdk.js';

const args = JSON.parse(process.argv[2]!) as { n: number; otelSampler: OtelSampler };
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
const handler = async (): Promise<void> => {};
// One warm-up pass (JIT), then the measured one.
for (const pass of [0, 1]) {
  const cpu = process.cpuUsage();
  for (let i = 0; i < args.n; i++) {
    const started = performance.now();
    const parent = propagation.extract(ROOT_CONTEXT, headers[i]);
    const span = tracer.startSpan('process orders', { kind: SpanKind.CONSUMER }, parent);
    await context.with(trace.setSpan(parent, span), handler);
    span.end();
    duration.record((performance.now() - started) / 1000, attrs);
  }
  const used = process.cpuUsage(cpu);
  if (pass === 1) process.stdout.write(`${JSON.stringify({ cpuUsPerEntry: (used.user + used.system) / args.n })}\n`);
}
