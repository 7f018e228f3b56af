import { Module, type DynamicModule } from '@nestjs/common';
import { HandlingRecorder } from './handling-recorder.js';
import { OrdersController } from './orders.controller.js';
import { DEMO, REDIS_URL } from './tokens.js';
import type { DemoBehaviour } from './worker-config.js';

@Module({})
export class OrdersWorkerModule {
  static register(demo: DemoBehaviour, redisUrl: string): DynamicModule {
    return {
      module: OrdersWorkerModule,
      controllers: [OrdersController],
      providers: [{ provide: DEMO, useValue: demo }, { provide: REDIS_URL, useValue: redisUrl }, HandlingRecorder],
    };
  }
}
