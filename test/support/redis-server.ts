import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import type { ConnectionOption } from 'nestjs-redis-streams';
import { waitFor } from './wait-for.js';

/** The server binary the tests start: `redis-server`, or what REDIS_SERVER_BIN names (CI's Valkey pass: `valkey-server`). */
export const SERVER_BIN = process.env.REDIS_SERVER_BIN || 'redis-server';

/** The default dead-letter key of a stream: `<key>:dead`, on a cluster `{<key>}:dead` (same slot as the stream). */
export const deadLetterKey = (key: string): string =>
  process.env.TEST_REDIS === 'cluster' && !/\{[^}]+\}/.test(key) ? `{${key}}:dead` : `${key}:dead`;

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
  /** A fresh admin connection for the test's own commands (on a cluster an ioredis Cluster, typed as Redis: keyed commands work alike). */
  client(): Redis;
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
  const clients: Redis[] = [];
  const client = (url: string) => () => {
    const c = new Redis(url, { maxRetriesPerRequest: 1 });
    c.on('error', () => {});
    clients.push(c);
    return c;
  };
  const closeClients = () => Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));

  // Extra redis-server flags (`--replicaof …`) need a server of this file's own.
  if (args.length > 0 && (CLUSTER_MODE || process.env.REDIS_URL)) standalone = true;
  if (CLUSTER_MODE && !standalone) return clusterBackend((await import('vitest')).inject('redisClusterUrls'));
  const external = args.length > 0 ? undefined : process.env.REDIS_URL;
  if (external) {
    const url = new URL(external);
    if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(url.hostname)) {
      throw new Error(`REDIS_URL must point at a loopback address in tests, got ${url.hostname}`);
    }
    return {
      url: external,
      connection: external,
      cluster: false,
      port: Number(url.port || 6379),
      owned: false,
      client: client(external),
      restart: () => Promise.reject(new Error('cannot restart a server given by REDIS_URL')),
      kill: () => Promise.reject(new Error('cannot kill a server given by REDIS_URL')),
      revive: () => Promise.reject(new Error('cannot revive a server given by REDIS_URL')),
      stop: async () => void (await closeClients()),
    };
  }

  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let proc = await spawnRedis(port, args);
  return {
    url,
    connection: url,
    cluster: false,
    port,
    owned: true,
    client: client(url),
    restart: async () => {
      await stopProcess(proc);
      proc = await spawnRedis(port, args);
    },
    kill: (signal) => stopProcess(proc, signal),
    revive: async () => {
      proc = await spawnRedis(port, args);
    },
    stop: async () => {
      await closeClients();
      await stopProcess(proc);
    },
  };
}

/** The cluster the `cluster` project's global setup started (test/support/cluster-global-setup.ts), shared by its files. */
function clusterBackend(urls: string[]): TestRedis {
  const clients: Cluster[] = [];
  return {
    get url(): string {
      throw new Error('this suite runs on a cluster: use redis.connection, not redis.url');
    },
    connection: urls,
    cluster: true,
    port: Number(new URL(urls[0]!).port),
    owned: false,
    client: () => {
      const c = new Cluster(
        urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) })),
        { redisOptions: { maxRetriesPerRequest: 1 } },
      );
      c.on('error', () => {});
      clients.push(c);
      return c as unknown as Redis;
    },
    restart: () => Promise.reject(new Error('cannot restart the shared cluster')),
    kill: () => Promise.reject(new Error('cannot kill the shared cluster')),
    revive: () => Promise.reject(new Error('cannot revive the shared cluster')),
    stop: async () => void (await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())))),
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisClusterUrls: string[];
  }
}

async function spawnRedis(port: number, args: readonly string[]): Promise<ChildProcess> {
  const url = `redis://127.0.0.1:${port}`;
  const proc = spawn(SERVER_BIN, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], {
    stdio: 'ignore',
  });
  const spawnError = new Promise<never>((_, reject) =>
    proc.once('error', (err) =>
      reject(
        new Error(
          `could not start redis-server (${err.message}). Install it (apt-get install -y redis-server) or set REDIS_URL to a loopback server.`,
        ),
      ),
    ),
  );
  await Promise.race([spawnError, waitFor(() => ping(url), { timeoutMs: 10_000, message: `redis-server on port ${port}` })]);
  return proc;
}

async function ping(url: string): Promise<boolean> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill(signal);
  await exited;
}
