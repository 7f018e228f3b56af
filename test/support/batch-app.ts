/** Shared helpers of the batch handler tests (test/batch*.e2e.spec.ts). */
import { Controller, Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { RedisStreamsBatchContext, StreamPattern, type StreamBatchEntry } from 'nestjs-redis-streams';
import type { TestRedis } from './redis-server.js';

export interface BatchCall {
  pattern: string;
  ids: string[];
  streams: string[];
  payloads: unknown[];
  deliveryCounts: number[];
  /** `ctx.getSize()` of the call. */
  size: number;
}

/** Records every batch handler call; a test decides what the handler does (per pattern). */
@Injectable()
export class BatchLog {
  readonly calls: BatchCall[] = [];
  running = 0;
  maxRunning = 0;
  /** Passes of an interceptor that counts here (see CountingInterceptor). */
  intercepted = 0;
  behavior: (entries: StreamBatchEntry<Record<string, string>>[], pattern: string) => unknown = () => undefined;

  async handle(entries: StreamBatchEntry<Record<string, string>>[], ctx: RedisStreamsBatchContext): Promise<unknown> {
    this.calls.push({
      pattern: ctx.getPattern(),
      ids: entries.map((e) => e.context.getId()),
      streams: entries.map((e) => e.context.getStream()),
      payloads: entries.map((e) => e.payload),
      deliveryCounts: entries.map((e) => e.context.getDeliveryCount()),
      size: ctx.getSize(),
    });
    this.maxRunning = Math.max(this.maxRunning, ++this.running);
    try {
      return await this.behavior(entries, ctx.getPattern());
    } finally {
      this.running--;
    }
  }

  ids(pattern?: string): string[] {
    return this.calls.filter((c) => pattern === undefined || c.pattern === pattern).flatMap((c) => c.ids);
  }
}

/** Counts its passes in BatchLog: one per handler call. */
@Injectable()
export class CountingInterceptor implements NestInterceptor {
  constructor(private readonly log: BatchLog) {}
  intercept(_context: ExecutionContext, next: CallHandler) {
    this.log.intercepted++;
    return next.handle();
  }
}

/** A controller whose one method is `@StreamPattern(pattern, extras)` and records into BatchLog. */
export function batchController(
  pattern: string,
  extras: Record<string, unknown>,
  decorate: (proto: object, key: string, d: PropertyDescriptor) => void = () => {},
) {
  @Controller()
  class C {
    constructor(readonly log: BatchLog) {}
    handle(entries: StreamBatchEntry<Record<string, string>>[], ctx: RedisStreamsBatchContext) {
      return this.log.handle(entries, ctx);
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(C.prototype, 'handle')!;
  decorate(C.prototype, 'handle', descriptor);
  StreamPattern(pattern, extras)(C.prototype, 'handle', descriptor);
  Payload()(C.prototype, 'handle', 0);
  Ctx()(C.prototype, 'handle', 1);
  return C;
}

export async function addOrders(redis: TestRedis, key: string, n: number, from = 0): Promise<string[]> {
  const pipeline = redis.client().pipeline();
  for (let i = from; i < from + n; i++) pipeline.xadd(key, '*', 'order_id', String(i));
  return (await pipeline.exec())!.map(([err, id]) => {
    if (err) throw err;
    return id as string;
  });
}

/** entries-read of the group: entries delivered to some consumer (fetched into a batch). */
export const deliveredOf = async (redis: TestRedis, key: string, group = 'g'): Promise<number> => {
  const info = (await redis.client().xinfo('GROUPS', key)) as unknown[][];
  const g = info
    .map((row) => Object.fromEntries(Array.from({ length: row.length / 2 }, (_, i) => [row[2 * i], row[2 * i + 1]])))
    .find((row) => row.name === group);
  return Number(g?.['entries-read'] ?? 0);
};
