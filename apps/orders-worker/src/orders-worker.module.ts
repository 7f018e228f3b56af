import { Module, type DynamicModule } from '@nestjs/common';
import { HandlingRecorder } from './handling-recorder.js';
import { ordersController } from './orders.controller.js';
import { DEMO, REDIS_CONNECTION } from './tokens.js';
import type { DemoBehaviour } from './worker-config.js';

@Module({})
export class OrdersWorkerModule {
  /** `ordersPartitions`: the `orders` stream's partition count (STREAMS_PARTITIONS), undefined for one plain stream. */
  static register(demo: DemoBehaviour, connection: string | string[], ordersPartitions?: number): DynamicModule {
    return {
      module: OrdersWorkerModule,
      controllers: [ordersController(ordersPartitions)],
      providers: [{ provide: DEMO, useValue: demo }, { provide: REDIS_CONNECTION, useValue: connection }, HandlingRecorder],
    };
  }
}
