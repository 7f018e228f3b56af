import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { RedisStreamsRecord } from 'nestjs-redis-streams';
import { lastValueFrom, timeout } from 'rxjs';

export const ORDERS_CLIENT = 'ORDERS_CLIENT';

const STATUSES = ['pending', 'paid', 'shipped'] as const;
/** Demo orders come from this many customers. */
const CUSTOMERS = 40;

/** Emits demo orders through the transport's ClientProxy, then asks the worker for its tally. */
@Injectable()
export class OrdersProducer {
  private readonly logger = new Logger('orders-api');

  constructor(@Inject(ORDERS_CLIENT) private readonly client: ClientProxy) {}

  async emitOrders(count: number, firstId: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const id = firstId + i;
      const order = { order_id: String(id), customer_id: `customer-${id % CUSTOMERS}`, status: STATUSES[i % STATUSES.length] };
      // On a partitioned stream (STREAMS_PARTITIONS) the customer picks the partition: one customer's
      // orders stay in one partition, in order. On a plain stream the key is not used.
      const record = new RedisStreamsRecord(order, { source: 'orders-api' }, { partitionKey: order.customer_id });
      // The id Redis gave the entry: the worker sees the same one in ctx.getId().
      ids.push(await lastValueFrom(this.client.emit<string>('orders', record)));
    }
    this.logger.log(`emitted ${count} orders (${ids[0]} … ${ids.at(-1)})`);
    return ids;
  }

  /** Request-response: the worker answers how many orders it has handled so far. */
  async workerStats(timeoutMs: number): Promise<{ handled: number; consumer: string }> {
    return lastValueFrom(this.client.send<{ handled: number; consumer: string }>('orders-stats', {}).pipe(timeout(timeoutMs)));
  }
}
