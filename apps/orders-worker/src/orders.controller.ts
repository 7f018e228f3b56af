import { Controller, Inject, Logger, type Type } from '@nestjs/common';
import { Ctx, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { REDIS_STREAMS_TRANSPORT, RedisStreamsContext, StreamPattern } from 'nestjs-redis-streams';
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
 */
export function ordersController(partitions?: number): Type<unknown> {
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

    @StreamPattern('orders', partitions === undefined ? undefined : { partitions })
    async handleOrder(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext): Promise<void> {
      const { workMs, jitterMs, failRate, quiet } = this.demo;
      const ms = workMs + (jitterMs > 0 ? Math.floor(this.random() * (jitterMs + 1)) : 0);
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      if (failRate > 0 && this.random() < failRate) throw new RpcException(`simulated failure of order ${order.order_id}`);
      // Partitions are separate streams whose ids can coincide: their entries are told apart by key.
      await this.recorder.record(ctx.getPartition() === undefined ? ctx.getId() : `${ctx.getStream()} ${ctx.getId()}`);
      this.handled++;
      if (!quiet) {
        const partition = ctx.getPartition();
        const customer = order.customer_id === undefined ? '' : ` customer ${order.customer_id}`;
        const where = partition === undefined ? '' : ` partition ${partition}`;
        this.logger.log(`order ${order.order_id} (${order.status})${customer}${where} entry ${ctx.getId()} delivery ${ctx.getDeliveryCount()} [handled ${this.handled}]`);
      }
    }

    /** Request-response (`client.send('orders-stats', {})`): this worker's tally. */
    @MessagePattern('orders-stats', REDIS_STREAMS_TRANSPORT)
    stats(@Ctx() ctx: RedisStreamsContext): { handled: number; consumer: string } {
      return { handled: this.handled, consumer: ctx.getConsumer() };
    }
  }
  return OrdersController;
}
