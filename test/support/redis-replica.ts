import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseInfo } from './redis-info.js';
import { startRedis, type TestRedis } from './redis-server.js';
import { waitFor } from './wait-for.js';

export interface ReplicatedRedis {
  readonly master: TestRedis;
  /** The replica `addReplica()` started; throws before. */
  readonly replica: TestRedis;
  /** Starts a replica of the master (`--replicaof`); resolves once its first (full) sync is done. */
  addReplica(): Promise<TestRedis>;
  /** Resolves once the replica has applied everything the master had written when it was called (WAIT 1). */
  synced(): Promise<void>;
  /** kill -9 of the master, then `REPLICAOF NO ONE` on the replica: what a failover does. */
  failover(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A master on a loopback port, and on demand one replica of it, both started with the one
 * launcher of startRedis. A replica added after the data exists gets it by a full sync (an RDB),
 * later writes by the replication stream: failover quirks differ between the two. Each server
 * has its own RDB file in a temp dir (a replica writes the RDB of its full sync to disk).
 */
export async function startReplicated(): Promise<ReplicatedRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'redis-replica-'));
  const master = await startRedis({ standalone: true, args: ['--dir', dir, '--dbfilename', 'master.rdb'] });
  const masterAdmin = master.client();
  let replica: TestRedis | undefined;
  const replicaOrThrow = () =>
    replica ??
    (() => {
      throw new Error('no replica: call addReplica() first');
    })();
  return {
    master,
    get replica() {
      return replicaOrThrow();
    },
    addReplica: async () => {
      replica = await startRedis({
        standalone: true,
        args: ['--dir', dir, '--dbfilename', 'replica.rdb', '--replicaof', '127.0.0.1', String(master.port)],
      });
      const admin = replica.client();
      await waitFor(async () => parseInfo(await admin.info('replication')).master_link_status === 'up', {
        message: 'the replica’s first sync',
      });
      return replica;
    },
    synced: async () => {
      const acked = Number(await masterAdmin.call('WAIT', 1, 10_000));
      if (acked !== 1) throw new Error('the replica did not acknowledge the master’s writes within 10 s');
    },
    failover: async () => {
      const admin = replicaOrThrow().client();
      await master.kill('SIGKILL');
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await waitFor(async () => parseInfo(await admin.info('replication')).role === 'master', { message: 'the replica promoted' });
    },
    stop: async () => {
      await Promise.all([master.stop(), replica?.stop()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
