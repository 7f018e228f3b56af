// The consumer of the scale section (bench/scale.ts), in a process of its own: this transport reading
// `streams` (one handler each, registered on the server as Nest registers decorated handlers), no-op.
// Protocol: prints {"ready", "startMs"} once listening; {"done"} once `expect` entries were handled;
// on stdin "report" prints its report, then stops and exits.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import type { MessageHandler } from '@nestjs/microservices';
import { createInterface } from 'node:readline';
import { RedisStreamsServer, type RedisStreamsContext } from 'nestjs-redis-streams';

export interface ScaleChildArgs {
  url: string;
  streams: string[];
  group: string;
  consumer: string;
  minIdleMs: number;
  blockMs: number;
  batchSize: number;
  /** Entries to handle before {"done"}. */
  expect: number;
}

export interface ScaleChildReport {
  /** Entries with `k old` (a backlog): handled, and the clock (performance.timeOrigin + now) at the first and last. */
  old: { handled: number; firstAt: number; lastAt: number };
  /** Entries with `k new` and `t` (the producer's clock): append → handler ms, and when each was handled. */
  fresh: { latencies: number[]; at: number[] };
  /** CPU µs this process used from listen to the report. */
  cpuUs: number;
}

Logger.overrideLogger(['error']);
const args = JSON.parse(process.argv[2]!) as ScaleChildArgs;
const now = () => performance.timeOrigin + performance.now();
const emit = (value: unknown) => process.stdout.write(JSON.stringify(value) + '\n');
const report: ScaleChildReport = { old: { handled: 0, firstAt: 0, lastAt: 0 }, fresh: { latencies: [], at: [] }, cpuUs: 0 };
let handled = 0;

const handler = (async (_data: unknown, ctx: RedisStreamsContext) => {
  const at = now();
  const fields = ctx.getFields();
  if (fields['k'] === 'new') {
    report.fresh.latencies.push(at - Number(fields['t']));
    report.fresh.at.push(at);
  } else {
    if (report.old.handled++ === 0) report.old.firstAt = at;
    report.old.lastAt = at;
  }
  if (++handled === args.expect) emit({ done: true });
  return undefined;
}) as MessageHandler;
handler.isEventHandler = true;

const server = new RedisStreamsServer({
  connection: args.url,
  group: args.group,
  consumer: args.consumer,
  minIdleMs: args.minIdleMs,
  blockMs: args.blockMs,
  batchSize: args.batchSize,
  telemetry: false,
});
for (const stream of args.streams) server.addHandler(stream, handler, true);
const cpuAtStart = process.cpuUsage();
const startedAt = performance.now();
server.listen((err?: unknown) => {
  if (err) {
    process.stderr.write(`scale-child: listen failed: ${String(err)}\n`);
    process.exit(1);
  }
  emit({ ready: true, startMs: performance.now() - startedAt });
});

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line !== 'report') return;
  const cpu = process.cpuUsage(cpuAtStart);
  report.cpuUs = cpu.user + cpu.system;
  emit(report);
  void server.close().then(() => process.exit(0));
});
