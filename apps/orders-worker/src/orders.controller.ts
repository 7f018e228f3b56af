import { Controller, Inject, Logger, type Type } from '@nestjs/common';
import { Ctx, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import {
  BatchFailure,
  REDIS_STREAMS_TRANSPORT,
  RedisStreamsContext,
  StreamPattern,
  type StreamBatchEntry,
  type StreamBatchOptions,
} from 'nestjs-redis-streams';
import { HandlingRecorder } from './handling-recorder.js';
import { DEMO } from './tokens.js';
import { seededRandom, type DemoBehaviour } from './worker-config.js';

interface Order {
  order_id: string;
  status: string;
  /** Set by apps/orders-api (its partition key); absent in an order added with redis-cli. */
  customer_id?: string;
}

/**
 * The worker's controller. A factory, because `@StreamPattern` takes the `orders` stream's
 * partition count when the class is defined, and that count is configuration
 * (STREAMS_PARTITIONS): `partitions` n makes the handler read `{orders:0}` … `{orders:n-1}`.
 * With `batch` (DEMO_BATCH_MAX) the orders go to `handleOrders`, a batch handler, instead. With
 * `ordered` (DEMO_ORDERED=1) each customer's orders (the producer's partition key) are handled one
 * at a time, in order, and different customers' in parallel (STREAMS_CONCURRENCY).
 */
export function ordersController(partitions?: number, batch?: StreamBatchOptions, ordered = false): Type<unknown> {
  @Controller()
  class OrdersController {
    private readonly logger = new Logger('orders');
    private readonly random: () => number;
    private handled = 0;

    constructor(
      @Inject(DEMO) private readonly demo: DemoBehaviour,
      private readonly recorder: HandlingRecorder,
    ) {
      this.random = seededRandom(demo.seed);
    }

    async handleOrder(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext): Promise<void> {
      const error = await this.handle(order, ctx);
      if (error) throw error;
    }

    /** The batch handler: each order as `handleOrder` does it; the ones that fail are reported together. */
    async handleOrders(@Payload() orders: StreamBatchEntry<Order>[]): Promise<void> {
      const failures: { entry: StreamBatchEntry; error: unknown }[] = [];
      for (const entry of orders) {
        const error = await this.handle(entry.payload, entry.context);
        if (error) failures.push({ entry, error });
      }
      if (failures.length > 0) throw new BatchFailure(failures);
    }

    /** One order: the simulated work, failure, record and log line. Its failure is returned, not thrown. */
    private async handle(order: Order, ctx: RedisStreamsContext): Promise<RpcException | undefined> {
      const { workMs, jitterMs, failRate, failFirst, quiet } = this.demo;
      const ms = workMs + (jitterMs > 0 ? Math.floor(this.random() * (jitterMs + 1)) : 0);
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      // Before DEMO_FAIL_RATE's draw, and drawing nothing: a seeded run's failures stay the same.
      const delivery = ctx.getDeliveryCount();
      if (delivery <= failFirst)
        return new RpcException(`simulated failure of order ${order.order_id} on delivery ${delivery} (DEMO_FAIL_FIRST=${failFirst})`);
      if (failRate > 0 && this.random() < failRate) return new RpcException(`simulated failure of order ${order.order_id}`);
      // Partitions are separate streams whose ids can coincide: their entries are told apart by key.
      await this.recorder.record(ctx.getPartition() === undefined ? ctx.getId() : `${ctx.getStream()} ${ctx.getId()}`);
      this.handled++;
      if (!quiet) {
        const partition = ctx.getPartition();
        const customer = order.customer_id === undefined ? '' : ` customer ${order.customer_id}`;
        const where = partition === undefined ? '' : ` partition ${partition}`;
        this.logger.log(
          `order ${order.order_id} (${order.status})${customer}${where} entry ${ctx.getId()} delivery ${ctx.getDeliveryCount()} [handled ${this.handled}]`,
        );
      }
      return undefined;
    }

    /** Request-response (`client.send('orders-stats', {})`): this worker's tally. */
    @MessagePattern('orders-stats', REDIS_STREAMS_TRANSPORT)
    stats(@Ctx() ctx: RedisStreamsContext): { handled: number; consumer: string } {
      return { handled: this.handled, consumer: ctx.getConsumer() };
    }
  }
  // Decorated here, not in the class body: which method reads `orders` is configuration.
  const method = batch ? 'handleOrders' : 'handleOrder';
  const descriptor = Object.getOwnPropertyDescriptor(OrdersController.prototype, method)!;
  StreamPattern('orders', {
    ...(partitions === undefined ? {} : { partitions }),
    ...(batch ? { batch } : {}),
    ...(ordered ? { ordered } : {}),
  })(OrdersController.prototype, method, descriptor);
  return OrdersController;
}
