import { Cluster, Redis } from 'ioredis';
import type { ConnectionOption } from 'nestjs-redis-streams';
import { startRedisServer, type RedisServerProcess } from '../../scripts/lib/redis-server.mjs';
import { deadLetterKeyOf, retryKeyOf } from '../../libs/redis-streams/src/key-names.js';

// The one launcher and port picker (scripts/lib, shared with the scripts, the demo and the benchmark), typed.
export { SERVER_BIN } from '../../scripts/lib/redis-server.mjs';
export { freePort } from '../../scripts/lib/ports.mjs';

/** The default dead-letter key of a stream: `<key>:dead`, on a cluster `{<key>}:dead` (same slot as the stream; key-names.ts). */
export const deadLetterKey = (key: string): string => deadLetterKeyOf(key, process.env.TEST_REDIS === 'cluster');

/** The retry set of `group` on a stream: `<key>:retry:<group>`, on a cluster `{<key>}:retry:<group>` (key-names.ts). */
export const retrySetKey = (key: string, group: string): string => retryKeyOf(key, group, process.env.TEST_REDIS === 'cluster');

/** True in the `cluster` test project: the suites that run there talk to a shared local Redis Cluster. */
export const CLUSTER_MODE = process.env.TEST_REDIS === 'cluster';

export interface TestRedis {
  /** redis:// URL of the server (one node only: on a cluster, use `connection`). */
  readonly url: string;
  /** The transport's `connection` option: the URL, or on a cluster its node URLs. */
  readonly connection: ConnectionOption;
  /** True on a cluster. */
  readonly cluster: boolean;
  readonly port: number;
  /** True when this file started the server itself (so it may restart or stop it). */
  readonly owned: boolean;
  /**
   * The admin connection of this handle for the test's own commands, opened on first use and shared by every call
   * (a new one after restart()/kill(), or once closed); on a cluster an ioredis Cluster, typed as Redis: keyed commands work alike.
   */
  client(): Redis;
  /** A connection of the test's own, never shared: for AUTH, blocking reads, CLIENT KILL/PAUSE targets, subscriptions. Closed by stop(). */
  newClient(): Redis;
  /** Kills the server and starts a new, empty one on the same port (owned servers only). */
  restart(): Promise<void>;
  /** Kills the server (SIGTERM, or the signal given: `SIGKILL` for a crash) and leaves it down until `revive()` (owned servers only). */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts a new, empty server on the port of the one `kill()` stopped. */
  revive(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * One throwaway redis-server per test file on a free loopback port (no persistence), or
 * the server at REDIS_URL when that is set; in the cluster project, the shared cluster unless
 * `standalone` asks for one node. Fails with a clear message when neither works.
 */
export async function startRedis({
  standalone = false,
  args = [],
}: { standalone?: boolean; args?: readonly string[] } = {}): Promise<TestRedis> {
  // Extra redis-server flags (`--replicaof …`) need a server of this file's own.
  if (args.length > 0 && (CLUSTER_MODE || process.env.REDIS_URL)) standalone = true;
  if (CLUSTER_MODE && !standalone) return clusterBackend((await import('vitest')).inject('redisClusterUrls'));
  const external = args.length > 0 ? undefined : process.env.REDIS_URL;
  if (external) {
    const url = new URL(external);
    if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(url.hostname)) {
      throw new Error(`REDIS_URL must point at a loopback address in tests, got ${url.hostname}`);
    }
    const clients = adminClients(() => new Redis(external, { maxRetriesPerRequest: 1 }));
    return {
      url: external,
      connection: external,
      cluster: false,
      port: Number(url.port || 6379),
      owned: false,
      ...clients.api,
      restart: () => Promise.reject(new Error('cannot restart a server given by REDIS_URL')),
      kill: () => Promise.reject(new Error('cannot kill a server given by REDIS_URL')),
      revive: () => Promise.reject(new Error('cannot revive a server given by REDIS_URL')),
      stop: () => clients.close(),
    };
  }

  let server: RedisServerProcess = await startRedisServer({ args });
  const { port, url } = server;
  const clients = adminClients(() => new Redis(url, { maxRetriesPerRequest: 1 }));
  return {
    url,
    connection: url,
    cluster: false,
    port,
    owned: true,
    ...clients.api,
    restart: async () => {
      await server.stop();
      clients.forgetShared();
      server = await startRedisServer({ port, args });
    },
    kill: async (signal) => {
      await server.stop(signal);
      clients.forgetShared();
    },
    revive: async () => {
      server = await startRedisServer({ port, args });
    },
    stop: async () => {
      await clients.close();
      await server.stop();
    },
  };
}

/** client() (one shared admin connection) and newClient() (one per call), all closed by close(). */
function adminClients(open: () => Redis) {
  const all: Redis[] = [];
  let shared: Redis | undefined;
  const newClient = () => {
    const c = open();
    c.on('error', () => {});
    all.push(c);
    return c;
  };
  return {
    api: {
      client: () => (shared && shared.status !== 'end' ? shared : (shared = newClient())),
      newClient,
    },
    /** The next client() opens a fresh connection (after a restart: one that is not mid-backoff); the old one stays open. */
    forgetShared: () => void (shared = undefined),
    close: async () => void (await Promise.all(all.map((c) => c.quit().catch(() => c.disconnect())))),
  };
}

/** The cluster the `cluster` project's global setup started (test/support/cluster-global-setup.ts), shared by its files. */
function clusterBackend(urls: string[]): TestRedis {
  const clients = adminClients(() => {
    const nodes = urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) }));
    return new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } }) as unknown as Redis;
  });
  return {
    get url(): string {
      throw new Error('this suite runs on a cluster: use redis.connection, not redis.url');
    },
    connection: urls,
    cluster: true,
    port: Number(new URL(urls[0]!).port),
    owned: false,
    ...clients.api,
    restart: () => Promise.reject(new Error('cannot restart the shared cluster')),
    kill: () => Promise.reject(new Error('cannot kill the shared cluster')),
    revive: () => Promise.reject(new Error('cannot revive the shared cluster')),
    stop: () => clients.close(),
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisClusterUrls: string[];
  }
}
