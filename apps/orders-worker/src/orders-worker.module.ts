import { Module, type DynamicModule } from '@nestjs/common';
import { OrdersController } from './orders.controller.js';
import { WORK_MS } from './tokens.js';

@Module({})
export class OrdersWorkerModule {
  static register(workMs: number): DynamicModule {
    return {
      module: OrdersWorkerModule,
      controllers: [OrdersController],
      providers: [{ provide: WORK_MS, useValue: workMs }],
    };
  }
}
