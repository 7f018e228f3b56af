// The consumer of the retry section (bench/retries.ts), in a process of its own: this transport with the
// case's retry options, one handler that fails the entries the case says, timings and heap reported.
// Protocol: prints {"ready":true} once listening and {"progress","failed"} every 50 ms; on stdin "heap"
// prints {"heapUsed"} (after a gc when run with --expose-gc), on "report" its report, then stops and exits.
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, type MicroserviceOptions } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisStreamsServer, RetryLaterException, StreamPattern, type RedisStreamsContext, type RetryPolicy } from 'nestjs-redis-streams';

export interface RetryChildArgs {
  url: string;
  key: string;
  group: string;
  /**
   * downstream: with `failing`, entries whose `n` is a multiple of 10 fail their first two deliveries.
   * ontime: every entry fails its first delivery with RetryLaterException(its `delay` field); its retry's
   * server-side start and its due time (the retry set's score, read once the failure is settled) are reported.
   * hol: entries with a `w` field fail their first delivery (`retry` gives the wait); entries with `t` (the
   * producer's clock) report append → handler latency.
   */
  mode: 'downstream' | 'ontime' | 'hol';
  retry?: RetryPolicy;
  minIdleMs: number;
  batchSize: number;
  failing?: boolean;
  /** downstream: once this many succeeded and nothing is pending, prints {"settledAt"} (its clock). */
  n?: number;
}

export interface RetryChildReport {
  /** Successful handler calls, and the clock (performance.timeOrigin + now) at the first and the last. */
  succeeded: number;
  firstAt: number;
  lastAt: number;
  /** ontime: per retried entry, [its delay, due (server ms), start of its retry delivery (server ms)]. */
  retries: [number, number, number][];
  /** hol: append → handler ms of the entries with `t`. */
  latencies: number[];
}

const args = JSON.parse(process.argv[2]!) as RetryChildArgs;
const now = () => performance.timeOrigin + performance.now();
const emit = (value: unknown, then?: () => void) => process.stdout.write(JSON.stringify(value) + '\n', then);
const admin = new Redis(args.url);
const retrySet = `${args.key}:retry:${args.group}`;
const report: RetryChildReport = { succeeded: 0, firstAt: 0, lastAt: 0, retries: [], latencies: [] };
let failed = 0;
/** ontime: due time (server ms) of each failed entry, and the server-side start of its retry delivery. */
const dueOf = new Map<string, number>();
const startedAt = new Map<string, [delay: number, at: number]>();

/** When this delivery began, on the server's clock: Redis' TIME minus the entry's idle time (XPENDING). */
async function deliveredAt(id: string): Promise<number> {
  const [pending, time] = (await admin.multi().xpending(args.key, args.group, id, id, 1).time().exec())!;
  const [[, , idle]] = pending![1] as [[string, string, number, number]];
  const [s, us] = time![1] as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000) - idle;
}

async function handle(ctx: RedisStreamsContext): Promise<void> {
  const fields = ctx.getFields();
  const count = ctx.getDeliveryCount();
  if (args.mode === 'downstream' && args.failing && Number(fields.n) % 10 === 0 && count <= 2) throw new Error('downstream down');
  if (args.mode === 'ontime' && count === 1) throw new RetryLaterException(Number(fields.delay));
  if (args.mode === 'ontime') startedAt.set(ctx.getId(), [Number(fields.delay), await deliveredAt(ctx.getId())]);
  if (args.mode === 'hol' && fields.w !== undefined && count === 1) throw new Error('downstream down');
  const at = now();
  if (fields.t !== undefined) report.latencies.push(Math.round((at - Number(fields.t)) * 100) / 100);
  if (report.succeeded++ === 0) report.firstAt = at;
  report.lastAt = at;
}

@Controller()
class RetryBenchController {
  @StreamPattern(args.key)
  handle(@Ctx() ctx: RedisStreamsContext): Promise<void> {
    return handle(ctx);
  }
}

@Module({ controllers: [RetryBenchController] })
class RetryBenchModule {}

const server = new RedisStreamsServer({
  connection: args.url,
  group: args.group,
  consumer: 'c1',
  batchSize: args.batchSize,
  minIdleMs: args.minIdleMs,
  blockMs: 1000,
  ...(args.retry ? { retry: args.retry } : {}),
});
server.on('settled', (event) => {
  if (event.outcome !== 'failed') return;
  failed++;
  // Settled once its retry is recorded, long before the retry (≥ 50 ms later) takes the record away.
  if (args.mode === 'ontime') void admin.zscore(retrySet, event.id).then((score) => score !== null && dueOf.set(event.id, Number(score)));
});
const app = await NestFactory.createMicroservice<MicroserviceOptions>(RetryBenchModule, { strategy: server, logger: false });
await app.listen();
emit({ ready: true });
const progress = setInterval(() => emit({ progress: report.succeeded, failed }), 50);
if (args.n !== undefined) void watchSettled(args.n);

/** Polls XPENDING every 5 ms once `n` succeeded: the time at which the last of them was acked. */
async function watchSettled(n: number): Promise<void> {
  for (;;) {
    await sleep(5);
    if (report.succeeded < n) continue;
    const [pending] = (await admin.xpending(args.key, args.group)) as [number];
    if (Number(pending) === 0) {
      emit({ settledAt: now() });
      return;
    }
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'heap') {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    emit({ heapUsed: process.memoryUsage().heapUsed, gc: gc !== undefined });
  }
  if (line.trim() === 'report') void finish();
});

async function finish(): Promise<void> {
  clearInterval(progress);
  await app.close();
  for (const [id, [delay, at]] of startedAt) {
    const due = dueOf.get(id);
    if (due !== undefined) report.retries.push([delay, due, at]);
  }
  admin.disconnect();
  emit(report, () => process.exit(0));
}
