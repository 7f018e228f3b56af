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
  /** Ports of the nodes whose process still runs (all but the ones killed), frozen ones included. */
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
  /** The master serving `key`'s slot and a live replica of it, synced and known to every node (waits for one). */
  replicaOf(key: string): Promise<{ master: number; replica: number }>;
  /**
   * Cuts the replication of the master serving `key`'s slot, and keeps it cut: its replica frozen (SIGSTOP), then
   * CLIENT KILL TYPE replica on the master, so every write the master takes from then on exists there alone (a frozen
   * replica alone loses nothing: what the master sent waits in the replica's socket; a link killed alone is back within
   * a second). `thaw(replica)` ends it.
   */
  cutReplica(key: string): Promise<{ master: number; replica: number }>;
  /** SIGSTOP of node `port`: it holds its connections and answers nothing; the harness stops asking it until thaw(). */
  freeze(port: number): void;
  /** SIGCONT of a node freeze() stopped (nothing for one that is not frozen). */
  thaw(port: number): void;
  /** kill -9 of node `port`, whatever its role; resolves once its process is gone. */
  kill(port: number): Promise<void>;
  /**
   * Waits for a node other than `oldMaster` to serve `key`'s slot as a master, agreed by every live node with
   * cluster_state:ok (after a kill(): the automatic failover, cluster-node-timeout). Resolves with its port.
   */
  takenOver(key: string, oldMaster: number, timeoutMs?: number): Promise<number>;
  /**
   * Starts killed node `port` again as the same node (same port and nodes.conf). Resolves once it is a replica synced
   * to its master (a former master whose slots were taken over comes back as a replica of the node that took them),
   * known as such by every live node, with cluster_state:ok everywhere. `ms` runs from the start of the process.
   */
  revive(port: number): Promise<{ master: number; ms: number }>;
  /** Every node's state as it sees it now (CLUSTER NODES, INFO, slots, its log's end), for a failure's message. */
  describe(): Promise<string>;
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
  /** Nodes stopped by freeze(): running, answering nothing. */
  const frozen = new Set<number>();
  const live = () => ports.filter((port) => !node(port).dead);
  /** The nodes the harness asks: live and not frozen (a frozen node would hold a poll until its deadline). */
  const reachable = () => live().filter((port) => !frozen.has(port));
  const cmd = <T>(port: number, command: string, ...args: (string | number)[]) => spawned.call(port, command, ...args) as Promise<T>;
  /**
   * Every node's own view, for a failure's message: its flags, its master, the slots it sees served by whom, its
   * replication, and its log's end ("Manual failover timed out", "Failover election won" only show there).
   */
  const describe = async (): Promise<string> => {
    const parts: string[] = [];
    for (const port of ports) {
      const state = node(port).dead ? 'dead' : frozen.has(port) ? 'frozen' : 'live';
      parts.push(`--- node ${port} (${state}) ---`);
      if (state === 'live') {
        // A node that does not answer one question is not asked the next (each would wait out the poll's deadline).
        let answering = true;
        const ask = async (what: string, fn: () => Promise<string>) => {
          if (!answering) return;
          const answer = await fn().catch((err: unknown) => {
            answering = false;
            return `(failed: ${(err as Error).message})`;
          });
          parts.push(`${what}: ${answer}`);
        };
        await ask('cluster', async () => {
          const info = parseInfo(await cmd<string>(port, 'CLUSTER', 'INFO'));
          return ['cluster_state', 'cluster_current_epoch', 'cluster_my_epoch', 'cluster_known_nodes']
            .map((k) => `${k}=${info[k]}`)
            .join(' ');
        });
        await ask('replication', async () => {
          const r = parseInfo(await cmd<string>(port, 'INFO', 'replication'));
          return Object.entries(r)
            .filter(([k]) => /^(role|master_port|master_link_status|connected_slaves|slave\d+|master_repl_offset)$/.test(k))
            .map(([k, v]) => `${k}=${v}`)
            .join(' ');
        });
        await ask('slots', async () => (await rangesIn(port)).map(({ start, end, master }) => `${start}-${end}@${master}`).join(' '));
        await ask('nodes', async () => `\n${(await cmd<string>(port, 'CLUSTER', 'NODES')).trim()}`);
      }
      parts.push(`log:\n${await spawned.logTail(port, 25)}`);
      // A node that crashed: what it said crashed it (the tail above is only its memory test).
      const crash = state === 'dead' ? await spawned.crashReport(port) : null;
      if (crash) parts.push(`its crash report:\n${crash}`);
    }
    return parts.join('\n');
  };
  /** Appends every node's view and log to a failure: what the cluster looked like when the wait gave up. */
  const withLogs = async <T>(action: Promise<T>): Promise<T> => {
    try {
      return await action;
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await describe()}`, { cause: err });
    }
  };
  const clusterInfo = async (port: number) => parseInfo(await cmd<string>(port, 'CLUSTER', 'INFO'));
  const replication = async (port: number) => parseInfo(await cmd<string>(port, 'INFO', 'replication'));
  const role = (port: number) => cmd<unknown[]>(port, 'ROLE');
  const anyLive = () => {
    const port = reachable()[0];
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
  /**
   * `master` is a master serving `slot` in the view of every live node, each with cluster_state:ok; else throws saying
   * which node sees what (a wait's failure then names the node that disagreed, not only that one did).
   */
  const agreed = async (slot: number, master: number): Promise<true> => {
    if ((await role(master))[0] !== 'master') throw new Error(`${master} is not a master (ROLE)`);
    for (const port of reachable()) {
      const [state, owner] = [(await clusterInfo(port)).cluster_state, await ownerIn(port, slot)];
      if (state !== 'ok' || owner !== master)
        throw new Error(`node ${port} has cluster_state:${state} and sees slot ${slot} served by ${owner}`);
    }
    return true;
  };
  /** Every live node's CLUSTER NODES shows `replica` as a (non-failed) replica of `master`. */
  const knownAsReplica = async (replica: number, master: number) => {
    for (const port of reachable()) {
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
    if (r.role !== 'slave' || r.master_link_status !== 'up' || node(master).dead || frozen.has(master)) return undefined;
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
    for (const port of reachable()) {
      const r = await replication(port);
      if (r.role === 'slave' && Number(r.master_port) === master) replicas.push(port);
    }
    if (replicas.length === 0) throw new Error(`master ${master} of slot ${slot} has no live replica to promote`);
    const replica = await withLogs(
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
    frozen,
    live,
    reachable,
    cmd,
    describe,
    withLogs,
    replication,
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
  const { ports, node: byPort, frozen, live, reachable, cmd, describe, withLogs, replication, anyLive, keySlot } = h;
  const { clusterInfo, rangesIn, ownerIn, agreed, syncedTo, knownAsReplica, failoverCandidate } = h;
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
      await spawned.stop(); // SIGKILL reaches a frozen node too
    })());

  const takenOver = async (slot: number, oldMaster: number, timeoutMs = 30_000): Promise<number> =>
    withLogs(
      waitFor(
        async () => {
          const owner = await ownerIn(anyLive(), slot);
          if (owner === undefined || owner === oldMaster) throw new Error(`node ${anyLive()} sees slot ${slot} served by ${owner}`);
          return (await agreed(slot, owner)) && owner;
        },
        {
          timeoutMs,
          intervalMs: 20,
          message: `a replica of ${oldMaster} to take slot ${slot} over (cluster-node-timeout ${NODE_TIMEOUT_MS} ms)`,
        },
      ),
    );
  const kill = async (port: number) => {
    frozen.delete(port); // SIGKILL ends a stopped process as well
    await byPort(port).stop('SIGKILL'); // its polling connection goes with it
  };

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
      const tookOver = () => agreed(slot, newMaster);
      // Redis gives a manual failover 5 s, and lets it lapse now and then ("Manual failover timed
      // out", more often right after another failover): the operator's move is to ask again.
      for (let attempt = 1; ; attempt++) {
        const start = performance.now();
        await cmd(newMaster, 'CLUSTER', 'FAILOVER');
        const lapsed = await waitFor(tookOver, { timeoutMs: 7000, intervalMs: 20, message: 'the takeover' }).then(
          () => undefined,
          (err: Error) => err,
        );
        if (!lapsed) return { oldMaster, newMaster, ms: performance.now() - start };
        if (attempt === 3) {
          await withLogs(
            Promise.reject(
              new Error(
                `replica ${newMaster} did not take slot ${slot} over from ${oldMaster} after ${attempt} CLUSTER FAILOVER: ${lapsed.message}`,
              ),
            ),
          );
        }
      }
    },
    killMaster: async (key) => {
      const slot = await keySlot(key);
      // A replica that never synced considers its data too old and does not stand for election.
      const { master: oldMaster } = await failoverCandidate(slot);
      const start = performance.now();
      await kill(oldMaster);
      const newMaster = await takenOver(slot, oldMaster);
      return { oldMaster, newMaster, ms: performance.now() - start };
    },
    replicaOf: async (key) => failoverCandidate(await keySlot(key)),
    cutReplica: async (key) => {
      const { master, replica } = await failoverCandidate(await keySlot(key));
      freeze(replica);
      // Killed while the replica is frozen, the link stays down: it cannot reconnect until thawed.
      await cmd(master, 'CLIENT', 'KILL', 'TYPE', 'replica');
      return { master, replica };
    },
    freeze,
    thaw: (port) => {
      if (!frozen.delete(port)) return;
      if (!byPort(port).dead) byPort(port).proc.kill('SIGCONT');
    },
    kill,
    takenOver: async (key, oldMaster, timeoutMs) => takenOver(await keySlot(key), oldMaster, timeoutMs),
    revive: async (port) => {
      const start = performance.now();
      await spawned.revive(port);
      const master = await withLogs(
        waitFor(
          async () => {
            const m = await syncedTo(port);
            if (m === undefined) {
              const r = await replication(port);
              throw new Error(`${port}: role ${r.role}, master ${r.master_port}, link ${r.master_link_status}`);
            }
            if (!(await knownAsReplica(port, m))) throw new Error(`${port} not yet known as a replica of ${m} by every node`);
            for (const p of reachable()) {
              const state = (await clusterInfo(p)).cluster_state;
              if (state !== 'ok') throw new Error(`node ${p} has cluster_state:${state}`);
            }
            return m;
          },
          { timeoutMs: 30_000, intervalMs: 50, message: `node ${port} revived as a synced replica known to every node` },
        ),
      );
      return { master, ms: performance.now() - start };
    },
    describe,
    stop,
  };

  function freeze(port: number): void {
    if (byPort(port).dead) throw new Error(`node ${port} is dead: nothing to freeze`);
    if (frozen.has(port)) return;
    frozen.add(port);
    byPort(port).proc.kill('SIGSTOP');
  }
}
