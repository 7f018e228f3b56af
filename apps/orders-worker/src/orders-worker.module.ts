import { Module, type DynamicModule } from '@nestjs/common';
import type { StreamBatchOptions } from 'nestjs-redis-streams';
import { HandlingRecorder } from './handling-recorder.js';
import { ordersController } from './orders.controller.js';
import { DEMO, REDIS_CONNECTION } from './tokens.js';
import type { DemoBehaviour } from './worker-config.js';

@Module({})
export class OrdersWorkerModule {
  /**
   * `ordersPartitions`: the `orders` stream's partition count (STREAMS_PARTITIONS), undefined for
   * one plain stream. `ordersBatch`: orders go to a batch handler (DEMO_BATCH_MAX). `ordersOrdered`:
   * each customer's orders in order (DEMO_ORDERED=1).
   */
  static register(
    demo: DemoBehaviour,
    connection: string | string[],
    ordersPartitions?: number,
    ordersBatch?: StreamBatchOptions,
    ordersOrdered = false,
  ): DynamicModule {
    return {
      module: OrdersWorkerModule,
      controllers: [ordersController(ordersPartitions, ordersBatch, ordersOrdered)],
      providers: [{ provide: DEMO, useValue: demo }, { provide: REDIS_CONNECTION, useValue: connection }, HandlingRecorder],
    };
  }
}
