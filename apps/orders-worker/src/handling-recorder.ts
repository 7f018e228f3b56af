import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import { DEMO, REDIS_CONNECTION } from './tokens.js';
import type { DemoBehaviour } from './worker-config.js';

/** Counts successful handlings per entry (its id; `<stream> <id>` on a partitioned stream) in a Redis hash (DEMO_RECORD_KEY), so a test can count duplicates. */
@Injectable()
export class HandlingRecorder implements OnApplicationShutdown {
  private readonly redis: Redis | Cluster | null;

  constructor(
    @Inject(DEMO) private readonly demo: DemoBehaviour,
    @Inject(REDIS_CONNECTION) connection: string | string[],
  ) {
    this.redis = demo.recordKey ? connect(connection) : null;
  }

  async record(entryId: string): Promise<void> {
    if (this.redis && this.demo.recordKey) await this.redis.hincrby(this.demo.recordKey, entryId, 1);
  }

  // Runs after the transport closed, so the entry in hand was recorded first.
  async onApplicationShutdown(): Promise<void> {
    await this.redis?.quit();
  }
}

/** One node from its URL, or a cluster from its node URLs (their credentials and TLS apply to every node). */
function connect(connection: string | string[]): Redis | Cluster {
  if (typeof connection === 'string') return new Redis(connection);
  const urls = connection.map((text) => new URL(text));
  const first = urls[0]!;
  return new Cluster(
    urls.map((url) => ({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || 6379) })),
    {
      redisOptions: {
        ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    },
  );
}
