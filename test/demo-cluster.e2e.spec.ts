import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { partitionKeys } from 'nestjs-redis-streams';
import { requireBuilt } from './support/built.js';
import { spawnNode, WORKER_START_MS, WORKER_TEST_MS, type NodeProcess } from './support/node-process.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { waitFor } from './support/wait-for.js';

/** The demo apps and `npm run demo` on a Redis Cluster (REDIS_CLUSTER_URLS, STREAMS_PARTITIONS, --cluster). */

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Spawns a built script with the test's environment minus any Redis location or partitioning of the caller's. */
function run(script: string, args: string[], env: Record<string, string>): NodeProcess {
  const { REDIS_URL: _url, REDIS_CLUSTER_URLS: _cluster, STREAMS_PARTITIONS: _partitions, ...inherited } = process.env;
  const running = spawnNode(script, args, { ...inherited, NO_COLOR: '1', ...env });
  children.push(running.proc);
  return running;
}

/** True when nothing listens on 127.0.0.1:`port` any more. */
function closed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

describe('node scripts/local-cluster.mjs', () => {
  it('prints the URLs of 6 nodes of a healthy cluster, and removes it on SIGTERM', async () => {
    const script = run('scripts/local-cluster.mjs', [], {});
    const urls = await waitFor(
      () => /^(redis:\/\/127\.0\.0\.1:\d+,){5}redis:\/\/127\.0\.0\.1:\d+$/m.exec(script.output())?.[0].split(','),
      {
        message: 'the node URLs',
        timeoutMs: 20_000,
      },
    );
    const ports = urls.map((url) => Number(new URL(url).port));
    for (const port of ports) {
      const node = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
      try {
        expect(String(await node.call('CLUSTER', 'INFO'))).toContain('cluster_state:ok');
      } finally {
        node.disconnect();
      }
    }
    script.proc.kill('SIGTERM');
    expect(await script.exit, script.output()).toBe(0);
    for (const port of ports) expect(await closed(port), `node ${port} still listening`).toBe(true);
  });
});

describe('npm run demo -- --cluster', () => {
  const runDemo = (args: string[], env: Record<string, string> = {}) => {
    requireBuilt('dist/apps/orders-worker/main.js');
    requireBuilt('dist/apps/orders-api/main.js');
    return run('scripts/demo.mjs', args, { STREAMS_KEY_PREFIX: `demo-${process.pid}-${Date.now()}:`, ...env });
  };
  /** The node ports of the throwaway cluster the demo reported starting. */
  const clusterPorts = (output: string): number[] => {
    const ports = /local cluster: starting 6 (?:redis|valkey)\d*-server nodes on 127\.0\.0\.1 ports ([\d, ]+)/.exec(output)?.[1];
    expect(ports, output).toBeDefined();
    return ports!.split(', ').map(Number);
  };

  // The file's first throwaway cluster: its start, the worker's and the feed took past 20 s on CI's full machine. Waited
  // for while the demo's output grows, failing 45 s after it stopped.
  it('on Ctrl-C (SIGINT) stops the worker first, then the cluster', { timeout: 120_000 }, async () => {
    const demo = runDemo(['--cluster', '--quiet', '--orders', '30']);
    await waitFor(() => demo.output().includes('all 30 orders acked'), {
      message: 'the demo to finish feeding',
      timeoutMs: 45_000,
      progress: () => demo.output().length,
    });
    demo.proc.kill('SIGINT');
    expect(await demo.exit, demo.output()).toBe(0);
    expect(demo.output()).toMatch(/stopping \(Ctrl-C\)[\s\S]*worker exited with 0; 0 entries pending/);
    for (const port of clusterPorts(demo.output())) expect(await closed(port), `node ${port} still listening`).toBe(true);
  });

  // One throwaway cluster for both what the demo says of it and the partitions (a cluster and two Node processes each).
  it('feeds 200 orders through a throwaway local cluster, reports them all acked and removes the cluster; with STREAMS_PARTITIONS=3, counts the orders of every partition, one customer always on one partition', async () => {
    // Not --quiet: the worker's line per order shows its customer and partition.
    const demo = runDemo(['--cluster', '--once', '--orders', '200'], { STREAMS_PARTITIONS: '3' });
    expect(await demo.exit, demo.output()).toBe(0);
    const out = demo.output();
    expect(out).toMatch(/redis {3}cluster redis:\/\/127\.0\.0\.1:\d+ \(\+5 nodes\) \(local, throwaway\)/);
    expect(out).toContain('all 200 orders acked');
    expect(out).toMatch(/worker exited with 0; 0 entries pending/);
    const perPartition = /per partition: \S+\{orders:0\} (\d+), \S+\{orders:1\} (\d+), \S+\{orders:2\} (\d+)/.exec(out);
    expect(perPartition, out).not.toBeNull();
    const counts = perPartition!.slice(1).map(Number);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(200);
    for (const n of counts) expect(n).toBeGreaterThan(0);

    const partitionsOf = new Map<string, Set<number>>();
    const handled = [...out.matchAll(/\[orders\] order (\d+) \(\w+\) customer (\S+) partition (\d) entry/g)];
    expect(new Set(handled.map((m) => m[1])).size).toBe(200);
    for (const [, , customer, partition] of handled) {
      partitionsOf.set(customer!, (partitionsOf.get(customer!) ?? new Set()).add(Number(partition)));
    }
    for (const [customer, seen] of partitionsOf) expect([...seen], customer).toHaveLength(1);
    expect(new Set([...partitionsOf.values()].flatMap((s) => [...s]))).toEqual(new Set([0, 1, 2]));
    for (const port of clusterPorts(out)) expect(await closed(port), `node ${port} still listening`).toBe(true);
  });
});

describe('the demo worker on a cluster (REDIS_CLUSTER_URLS)', { timeout: WORKER_TEST_MS }, () => {
  let cluster: TestCluster;
  beforeAll(async () => (cluster = await startCluster()));
  afterAll(async () => cluster?.stop());

  const startWorker = (env: Record<string, string>) => run(requireBuilt('dist/apps/orders-worker/main.js'), [], env);

  it('with STREAMS_PARTITIONS=6 handles orders of all 6 partition keys, and on SIGTERM acks the order in hand and exits 0', async () => {
    const group = `demo-${randomUUID().slice(0, 8)}`;
    const prefix = `${group}:`;
    const keys = partitionKeys(prefix, 'orders', 6);
    // The partitions' hash tags spread them over the masters.
    expect(new Set(await Promise.all(keys.map((key) => cluster.masterOf(key)))).size).toBeGreaterThan(1);
    const r = cluster.client();
    const worker = startWorker({
      REDIS_CLUSTER_URLS: cluster.urls.join(','),
      REDIS_URL: 'redis://127.0.0.1:1', // the cluster wins
      STREAMS_PARTITIONS: '6',
      STREAMS_KEY_PREFIX: prefix,
      STREAMS_GROUP: group,
      STREAMS_CONSUMER: 'worker-1',
      // Long parks: shutdown must wake every lane's park, not wait for it.
      STREAMS_BLOCK_MS: '30000',
      DEMO_WORK_MS: '300',
    });
    await waitFor(() => worker.output().includes('Nest microservice successfully started'), {
      message: 'the worker to start',
      timeoutMs: WORKER_START_MS,
    });
    expect(worker.output()).toContain(`reading ${keys.map((k) => `"${k}"`).join(', ')}`);

    const ids = await Promise.all(keys.map((key, i) => r.xadd(key, '*', 'order_id', String(1001 + i), 'status', 'pending')));
    await waitFor(() => ids.every((id, i) => worker.output().includes(`order ${1001 + i} (pending) partition ${i} entry ${id}`)), {
      message: 'an order of each partition to be logged with its partition',
    });
    await waitFor(
      async () => (await Promise.all(keys.map(async (key) => ((await r.xpending(key, group)) as [number])[0]))).every((n) => n === 0),
      {
        message: 'all 6 orders acked',
      },
    );

    // SIGTERM once an order is in hand (its 300 ms of work has begun).
    const last = keys[5]!;
    const inHand = await r.xadd(last, '*', 'order_id', '2001', 'status', 'paid');
    await waitFor(
      async () => {
        const pending = (await r.xpending(last, group, '-', '+', 10)) as [string][];
        return pending.length === 1 && pending[0]![0] === inHand;
      },
      { message: 'the order in hand' },
    );
    worker.proc.kill('SIGTERM');
    expect(await worker.exit, worker.output()).toBe(0);
    expect(worker.output()).toContain(`order 2001 (paid) partition 5 entry ${inHand}`);
    for (const key of keys) expect(((await r.xpending(key, group)) as [number])[0], key).toBe(0);
  });

  it('refuses a REDIS_CLUSTER_URLS entry that is not a redis:// URL, naming it (password masked)', async () => {
    const worker = startWorker({ REDIS_CLUSTER_URLS: `${cluster.urls[0]},http://user:hunter2@127.0.0.1:7000` });
    expect(await worker.exit).toBe(1);
    expect(worker.output()).toContain(
      'REDIS_CLUSTER_URLS must be comma-separated redis://host:port URLs of cluster nodes, got "http://user:***@127.0.0.1:7000" as node 2 of 2',
    );
    expect(worker.output()).not.toContain('hunter2');
  });

  it.each(['0', '1.5', '65'])('refuses STREAMS_PARTITIONS=%s with a message naming it', async (value) => {
    const worker = startWorker({ REDIS_CLUSTER_URLS: cluster.urls.join(','), STREAMS_PARTITIONS: value });
    expect(await worker.exit).toBe(1);
    expect(worker.output()).toContain(`STREAMS_PARTITIONS must be a positive integer (1 to 64), got "${value}"`);
  });
});
