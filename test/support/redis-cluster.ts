import { Cluster, Redis } from 'ioredis';
import { NODE_TIMEOUT_MS, startLocalCluster, type LocalCluster } from '../../scripts/local-cluster.mjs';
import { parseInfo } from './redis-info.js';
import { waitFor } from './wait-for.js';

export interface ClusterNode {
  host: string;
  port: number;
}

export interface TestCluster {
  /** All 6 nodes as seeds. */
  readonly nodes: ClusterNode[];
  /** redis://127.0.0.1:<port> of each node. */
  readonly urls: string[];
  /** A fresh admin ioredis Cluster client (closed by stop()). */
  client(): Cluster;
  /** A fresh admin connection to one node (closed by stop()). */
  node(port: number): Redis;
  /** Ports of the nodes whose process still runs (all but the ones killMaster() killed). */
  live(): number[];
  /** Port of the master currently serving the slot of `key` (asks CLUSTER SLOTS of a live node). */
  masterOf(key: string): Promise<number>;
  /** Ports of the current masters (live ones). */
  masters(): Promise<number[]>;
  /** CLUSTER KEYSLOT computed by Redis. */
  keySlot(key: string): Promise<number>;
  /**
   * Manual failover: CLUSTER FAILOVER on a synced replica of the master of `key`'s slot (sent again, up to 3
   * times, when Redis lets one lapse); resolves once that replica reports ROLE master, every live node agrees
   * it serves the slot, and cluster_state:ok everywhere. `ms` runs from the CLUSTER FAILOVER that took to that agreement.
   */
  failover(key: string): Promise<{ oldMaster: number; newMaster: number; ms: number }>;
  /**
   * kill -9 of the master of `key`'s slot; resolves once a replica got promoted (automatic failover after
   * cluster-node-timeout), all live nodes agree and report cluster_state:ok. `ms` runs from the kill.
   */
  killMaster(key: string): Promise<{ oldMaster: number; newMaster: number; ms: number }>;
  /** Kills every node (by pid) and removes the temp dir; idempotent. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';

/**
 * A throwaway 6-node Redis Cluster (3 masters, 3 replicas) from the one cluster spawner (scripts/local-cluster.mjs:
 * SERVER_BIN, free loopback ports, a fresh temp dir, one retry on new ports). Resolves once every slot is assigned,
 * every node reports cluster_state:ok and every replica has finished its first sync, so a test may fail over at once.
 */
export async function startCluster(): Promise<TestCluster> {
  // Vitest ends a fork worker with SIGTERM, which skips 'exit' handlers: the nodes go with it, whoever else listens.
  const spawned = await startLocalCluster({ detached: false, signals: 'always', ready: (c) => replicasReady(harness(c)) });
  return testCluster(spawned);
}

/** The spawner's nodes, with the queries the harness polls. */
function harness(spawned: LocalCluster) {
  const { ports } = spawned;
  const node = (port: number) => spawned.node(port);
  const live = () => ports.filter((port) => !node(port).dead);
  const cmd = <T>(port: number, command: string, ...args: (string | number)[]) => spawned.call(port, command, ...args) as Promise<T>;
  /** Appends the end of the nodes' logs to a failure: "Manual failover timed out" and the like only show there. */
  const withLogs = async <T>(about: number[], action: Promise<T>): Promise<T> => {
    try {
      return await action;
    } catch (err) {
      const logs = await Promise.all(about.map(async (port) => `--- node ${port} log ---\n${await spawned.logTail(port)}`));
      throw new Error(`${(err as Error).message}\n${logs.join('\n')}`, { cause: err });
    }
  };
  const clusterInfo = async (port: number) => parseInfo(await cmd<string>(port, 'CLUSTER', 'INFO'));
  const replication = async (port: number) => parseInfo(await cmd<string>(port, 'INFO', 'replication'));
  const role = (port: number) => cmd<unknown[]>(port, 'ROLE');
  const anyLive = () => {
    const port = live()[0];
    if (port === undefined) throw new Error('no live node left in the cluster');
    return port;
  };
  const keySlot = (key: string) => cmd<number>(anyLive(), 'CLUSTER', 'KEYSLOT', key);
  /**
   * Node `port`'s view of who serves which slots. Only masters: Redis 7.0 leaves a replica out of CLUSTER SLOTS
   * while its replication offset is 0, i.e. until the master's first write or its ping 10 s later.
   */
  const rangesIn = async (port: number) => {
    const ranges = await cmd<[number, number, [string, number, string]][]>(port, 'CLUSTER', 'SLOTS');
    return ranges.map(([start, end, master]) => ({ start, end, master: master[1] }));
  };
  /** The master serving `slot` in the view of node `port`. */
  const ownerIn = async (port: number, slot: number): Promise<number | undefined> =>
    (await rangesIn(port)).find(({ start, end }) => start <= slot && slot <= end)?.master;
  /** Every live node reports cluster_state:ok and sees `master` serving `slot`. */
  const agreed = async (slot: number, master: number) => {
    for (const port of live()) {
      if ((await clusterInfo(port)).cluster_state !== 'ok' || (await ownerIn(port, slot)) !== master) return false;
    }
    return true;
  };
  /** Every live node's CLUSTER NODES shows `replica` as a (non-failed) replica of `master`. */
  const knownAsReplica = async (replica: number, master: number) => {
    for (const port of live()) {
      // <id> <ip:port@cport> <flags> <master id or -> …
      const lines = (await cmd<string>(port, 'CLUSTER', 'NODES'))
        .trim()
        .split('\n')
        .map((line) => line.split(' '));
      const at = (p: number) => lines.find((fields) => fields[1]?.startsWith(`${HOST}:${p}@`));
      const [r, m] = [at(replica), at(master)];
      if (!r || !m || !r[2]!.split(',').includes('slave') || r[2]!.includes('fail') || r[3] !== m[0]) return false;
    }
    return true;
  };
  /**
   * The master `replica` is synced to, if both ends say so: the replica reports master_link_status:up a little
   * before the master turns it from wait_bgsave to state=online (on its first ACK), and only then does the master
   * list it in ROLE or count it for WAIT.
   */
  const syncedTo = async (replica: number): Promise<number | undefined> => {
    const r = await replication(replica);
    const master = Number(r.master_port);
    if (r.role !== 'slave' || r.master_link_status !== 'up' || node(master).dead) return undefined;
    const listed = Object.entries(await replication(master)).some(
      ([k, v]) => /^slave\d+$/.test(k) && v.includes(`,port=${replica},state=online,`),
    );
    return listed ? master : undefined;
  };
  /**
   * A live replica of the master serving `slot`, synced to it and known as its replica by every live node.
   * Either missing makes a failover time out silently ("Manual failover timed out" in the replica's log): the
   * master ignores a manual-failover request from a node it does not know as its replica, and the other masters
   * refuse their vote likewise. Gossip spreads that knowledge about a second after CLUSTER REPLICATE.
   */
  const failoverCandidate = async (slot: number): Promise<{ master: number; replica: number }> => {
    const master = await ownerIn(anyLive(), slot);
    if (master === undefined) throw new Error(`no master serves slot ${slot}`);
    const replicas: number[] = [];
    for (const port of live()) {
      const r = await replication(port);
      if (r.role === 'slave' && Number(r.master_port) === master) replicas.push(port);
    }
    if (replicas.length === 0) throw new Error(`master ${master} of slot ${slot} has no live replica to promote`);
    const replica = await withLogs(
      [master, ...replicas],
      waitFor(
        async () => {
          for (const port of replicas) if ((await syncedTo(port)) === master && (await knownAsReplica(port, master))) return port;
          return undefined;
        },
        { timeoutMs: 20_000, intervalMs: 50, message: `a replica of ${master} (${replicas.join(', ')}) synced and known to every node` },
      ),
    );
    return { master, replica };
  };

  return {
    ports,
    node,
    live,
    cmd,
    withLogs,
    clusterInfo,
    role,
    anyLive,
    keySlot,
    rangesIn,
    ownerIn,
    agreed,
    syncedTo,
    knownAsReplica,
    failoverCandidate,
  };
}

/**
 * Every replica synced and known to every node. Waited for at the start rather than inside failover(): with
 * --repl-diskless-sync-delay 0 it takes well under a second, and WAIT 1 in a test would otherwise block on it as well.
 */
async function replicasReady({ ports, syncedTo, knownAsReplica }: ReturnType<typeof harness>): Promise<void> {
  await waitFor(
    async () => {
      let ready = 0;
      for (const port of ports) {
        const master = await syncedTo(port);
        if (master !== undefined && (await knownAsReplica(port, master))) ready++; // see failoverCandidate()
      }
      return ready === ports.length / 2;
    },
    { timeoutMs: 20_000, intervalMs: 50, message: 'all 3 replicas synced (master_link_status:up, state=online) and known to every node' },
  );
}

function testCluster(spawned: LocalCluster): TestCluster {
  const h = harness(spawned);
  const { ports, node: byPort, live, cmd, withLogs, role, anyLive, keySlot, rangesIn, ownerIn, agreed, failoverCandidate } = h;
  // The test's own connections, kept apart from the harness' polling ones so a test closing or breaking its
  // clients cannot break the harness.
  const clients: (Redis | Cluster)[] = [];
  const track = <C extends Redis | Cluster>(c: C): C => {
    c.on('error', () => {});
    clients.push(c);
    return c;
  };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const c of clients) c.disconnect();
      await spawned.stop();
    })());

  return {
    nodes: ports.map((port) => ({ host: HOST, port })),
    urls: ports.map((port) => `redis://${HOST}:${port}`),
    client: () => track(new Cluster(ports.map((port) => ({ host: HOST, port })))),
    node: (port) => {
      byPort(port); // only this cluster's nodes
      return track(new Redis({ host: HOST, port, maxRetriesPerRequest: 1 }));
    },
    live,
    keySlot,
    masterOf: async (key) => {
      const slot = await keySlot(key);
      const owner = await ownerIn(anyLive(), slot);
      if (owner === undefined) throw new Error(`no master serves slot ${slot} of ${key}`);
      return owner;
    },
    masters: async () => {
      const ranges = await rangesIn(anyLive());
      return [...new Set(ranges.map((range) => range.master))].filter((port) => !byPort(port).dead).sort((a, b) => a - b);
    },
    failover: async (key) => {
      const slot = await keySlot(key);
      const { master: oldMaster, replica: newMaster } = await failoverCandidate(slot);
      const tookOver = async () => (await role(newMaster))[0] === 'master' && (await agreed(slot, newMaster));
      // Redis gives a manual failover 5 s, and lets it lapse now and then ("Manual failover timed
      // out", more often right after another failover): the operator's move is to ask again.
      for (let attempt = 1; ; attempt++) {
        const start = performance.now();
        await cmd(newMaster, 'CLUSTER', 'FAILOVER');
        const done = await waitFor(tookOver, { timeoutMs: 7000, intervalMs: 20, message: 'the takeover' }).then(
          () => true,
          () => false,
        );
        if (done) return { oldMaster, newMaster, ms: performance.now() - start };
        if (attempt === 3) {
          await withLogs(
            [newMaster, oldMaster],
            Promise.reject(
              new Error(`replica ${newMaster} did not take slot ${slot} over from ${oldMaster} after ${attempt} CLUSTER FAILOVER`),
            ),
          );
        }
      }
    },
    killMaster: async (key) => {
      const slot = await keySlot(key);
      // A replica that never synced considers its data too old and does not stand for election.
      const { master: oldMaster, replica } = await failoverCandidate(slot);
      const victim = byPort(oldMaster);
      const start = performance.now();
      await victim.stop('SIGKILL'); // its polling connection goes with it
      const newMaster = await withLogs(
        [replica],
        waitFor(
          async () => {
            const owner = await ownerIn(anyLive(), slot);
            if (owner === undefined || owner === oldMaster) return undefined;
            return (await role(owner))[0] === 'master' && (await agreed(slot, owner)) ? owner : undefined;
          },
          {
            timeoutMs: 30_000,
            intervalMs: 20,
            message: `a replica of the killed master ${oldMaster} to take slot ${slot} over (cluster-node-timeout ${NODE_TIMEOUT_MS} ms)`,
          },
        ),
      );
      return { oldMaster, newMaster, ms: performance.now() - start };
    },
    stop,
  };
}
