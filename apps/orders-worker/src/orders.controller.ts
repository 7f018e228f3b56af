import { Controller, Inject, Logger } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { REDIS_STREAMS_TRANSPORT, RedisStreamsContext, StreamPattern } from 'nestjs-redis-streams';
import { WORK_MS } from './tokens.js';

interface Order {
  order_id: string;
  status: string;
}

@Controller()
export class OrdersController {
  private readonly logger = new Logger('orders');
  private handled = 0;

  constructor(@Inject(WORK_MS) private readonly workMs: number) {}

  @StreamPattern('orders')
  async handleOrder(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext): Promise<void> {
    if (this.workMs > 0) await new Promise((resolve) => setTimeout(resolve, this.workMs));
    this.handled++;
    this.logger.log(
      `order ${order.order_id} (${order.status}) entry ${ctx.getId()} delivery ${ctx.getDeliveryCount()} [handled ${this.handled}]`,
    );
  }

  /** Request-response (`client.send('orders-stats', {})`): this worker's tally. */
  @MessagePattern('orders-stats', REDIS_STREAMS_TRANSPORT)
  stats(@Ctx() ctx: RedisStreamsContext): { handled: number; consumer: string } {
    return { handled: this.handled, consumer: ctx.getConsumer() };
  }
}
