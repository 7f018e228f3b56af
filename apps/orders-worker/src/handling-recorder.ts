import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { DEMO, REDIS_URL } from './tokens.js';
import type { DemoBehaviour } from './worker-config.js';

/** Counts successful handlings per entry id in a Redis hash (DEMO_RECORD_KEY), so a test can count duplicates. */
@Injectable()
export class HandlingRecorder implements OnApplicationShutdown {
  private readonly redis: Redis | null;

  constructor(@Inject(DEMO) private readonly demo: DemoBehaviour, @Inject(REDIS_URL) redisUrl: string) {
    this.redis = demo.recordKey ? new Redis(redisUrl) : null;
  }

  async record(entryId: string): Promise<void> {
    if (this.redis && this.demo.recordKey) await this.redis.hincrby(this.demo.recordKey, entryId, 1);
  }

  // Runs after the transport closed, so the entry in hand was recorded first.
  async onApplicationShutdown(): Promise<void> {
    await this.redis?.quit();
  }
}
