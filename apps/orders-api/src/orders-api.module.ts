import { Module, type DynamicModule } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { RedisStreamsClient, type RedisStreamsClientOptions } from 'nestjs-redis-streams';
import { ORDERS_CLIENT, OrdersProducer } from './orders-producer.js';

@Module({})
export class OrdersApiModule {
  static register(options: RedisStreamsClientOptions): DynamicModule {
    return {
      module: OrdersApiModule,
      imports: [ClientsModule.register([{ name: ORDERS_CLIENT, customClass: RedisStreamsClient, options }])],
      providers: [OrdersProducer],
      exports: [OrdersProducer],
    };
  }
}
