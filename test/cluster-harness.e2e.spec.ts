import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { timed } from './support/wait-for.js';

let cluster: TestCluster;
beforeAll(async () => {
  const { value, ms } = await timed(startCluster);
  cluster = value;
  console.log(`cluster started in ${Math.round(ms)} ms`);
}, 60_000);
afterAll(async () => cluster?.stop());

/** ROLE of a node: ['master', offset, [[host, port, offset], …]] or ['slave', host, port, state, offset]. */
const role = (port: number) => cluster.node(port).role() as Promise<[string, ...unknown[]]>;
const replicaPorts = async (master: number) => ((await role(master))[2] as [string, string, string][]).map(([, port]) => Number(port));

describe('local Redis Cluster harness', () => {
  it('starts 3 masters, each with one synced replica', async () => {
    const masters = await cluster.masters();
    expect(masters).toHaveLength(3);
    expect(cluster.nodes).toHaveLength(6);
    expect(cluster.urls).toEqual(cluster.nodes.map((n) => `redis://127.0.0.1:${n.port}`));
    for (const master of masters) expect(await replicaPorts(master)).toHaveLength(1);
  });

  it('hashes keys to the slots Redis redirects to, served by the master masterOf names', async () => {
    const masters = await cluster.masters();
    const owners = new Set<number>();
    for (let i = 0; i < 6; i++) {
      const key = `{orders:${i}}`;
      const [slot, master] = [await cluster.keySlot(key), await cluster.masterOf(key)];
      expect(masters).toContain(master);
      owners.add(master);
      // The owner takes the write; any other master answers MOVED with the same slot and owner.
      expect(await cluster.node(master).set(key, 'v')).toBe('OK');
      const other = masters.find((m) => m !== master)!;
      await expect(cluster.node(other).set(key, 'v')).rejects.toThrow(`MOVED ${slot} 127.0.0.1:${master}`);
    }
    // redis-cli splits the slots evenly, so index-tagged partitions spread over every master.
    expect(owners.size).toBe(3);
  });

  it('serves writes and reads through a Cluster client', async () => {
    const client = cluster.client();
    await client.set('{orders:0}:hello', 'world');
    expect(await client.get('{orders:0}:hello')).toBe('world');
  });

  it('fails over manually to the former replica, keeping the data written before', async () => {
    const before = await cluster.masterOf('{x}');
    const replicas = await replicaPorts(before);
    await cluster.client().set('{x}:before', '1');

    const { oldMaster, newMaster, ms } = await cluster.failover('{x}');
    console.log(`failover(): ${oldMaster} -> ${newMaster} in ${Math.round(ms)} ms`);

    expect(oldMaster).toBe(before);
    expect(replicas).toContain(newMaster);
    expect(await cluster.masterOf('{x}')).toBe(newMaster);
    expect((await role(newMaster))[0]).toBe('master');
    expect((await role(oldMaster)).slice(0, 3)).toEqual(['slave', '127.0.0.1', newMaster]);
    expect(await cluster.masters()).toHaveLength(3);
    expect(await cluster.node(newMaster).get('{x}:before')).toBe('1');
    expect(await cluster.client().get('{x}:before')).toBe('1');
  });

  it('promotes a replica after kill -9 of a master, keeping the data a replica acknowledged', async () => {
    const before = await cluster.masterOf('{y}');
    const replicas = await replicaPorts(before);
    // WAIT counts the replicas that acknowledged this connection's writes, so both go through the master itself.
    const master = cluster.node(before);
    await master.set('{y}:before', '1');
    expect(await master.wait(1, 0)).toBe(1);

    const { oldMaster, newMaster, ms } = await cluster.killMaster('{y}');
    console.log(`killMaster(): ${oldMaster} -> ${newMaster} in ${Math.round(ms)} ms`);

    expect(oldMaster).toBe(before);
    expect(replicas).toContain(newMaster);
    expect(cluster.live()).not.toContain(oldMaster);
    expect(cluster.live()).toHaveLength(5);
    expect(await cluster.masterOf('{y}')).toBe(newMaster);
    expect(await cluster.masters()).toHaveLength(3);
    expect(await cluster.masters()).not.toContain(oldMaster);
    for (const port of cluster.live()) expect(await cluster.node(port).cluster('INFO')).toContain('cluster_state:ok');
    expect(await cluster.node(newMaster).get('{y}:before')).toBe('1');
    expect(await cluster.client().get('{y}:before')).toBe('1');
  });

  it("cuts a master's replication, so its kill -9 loses what it took meanwhile; the killed node revived rejoins as a replica", async () => {
    const master = cluster.node(await cluster.masterOf('{z}'));
    await master.set('{z}:before', '1');
    expect(await master.wait(1, 0)).toBe(1);
    const { master: cut, replica } = await cluster.cutReplica('{z}');
    await master.set('{z}:while-cut', '1');
    // Nothing reaches the replica now: WAIT runs out its timeout with none.
    expect(await master.wait(1, 100)).toBe(0);
    await cluster.kill(cut);
    cluster.thaw(replica);
    expect(await cluster.takenOver('{z}', cut)).toBe(replica);
    expect(await cluster.node(replica).get('{z}:before')).toBe('1');
    expect(await cluster.node(replica).get('{z}:while-cut')).toBeNull();

    const { master: rejoined } = await cluster.revive(cut);
    expect(rejoined).toBe(replica);
    expect(cluster.live()).toContain(cut);
    expect((await role(cut)).slice(0, 3)).toEqual(['slave', '127.0.0.1', replica]);
    const revived = cluster.node(cut);
    await revived.readonly(); // a replica serves reads only when asked
    expect(await revived.get('{z}:before')).toBe('1'); // it took the promoted node's data, not its own
    expect(await revived.get('{z}:while-cut')).toBeNull();
    expect(await cluster.masters()).toHaveLength(3);
    // A replica again: the shard fails over back without loss.
    await cluster.client().set('{z}:after', '1');
    expect((await cluster.failover('{z}')).newMaster).toBe(cut);
    expect(await cluster.client().get('{z}:after')).toBe('1');
  });
});
