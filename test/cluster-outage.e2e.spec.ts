import { RedisStreamsClient } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { resolveConnection } from '../libs/redis-streams/src/options/connection.js';
import { openCommandConnection } from '../libs/redis-streams/src/redis/connection/connect.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

// A shard lost entirely (its master and its replica killed): its own cluster, which no other file sees.
let cluster: TestCluster;
beforeAll(async () => (cluster = await startCluster()), 60_000);
afterAll(async () => cluster?.stop());

/** What a pipeline's (or MULTI's) commands ended with: each one's error message, or "ok". */
const outcomes = (result: [Error | null, unknown][] | null) => (result ?? []).map(([err]) => (err ? err.message : 'ok'));

// First: the shard-loss test below leaves a shard without a master.
describe('a frozen master while another shard fails over (review-l)', () => {
  it("the frozen master's emit times out without blaming the other shard's MOVED", async () => {
    const prefix = uniquePrefix();
    const client = new RedisStreamsClient({ connection: cluster.urls, keyPrefix: prefix, commandTimeoutMs: 2000 });
    // Two streams on different masters.
    const a = `{${prefix}a}s`;
    let b = `{${prefix}b0}s`;
    const masterA = await cluster.masterOf(`${prefix}${a}`);
    for (let i = 1; (await cluster.masterOf(`${prefix}${b}`)) === masterA; i++) b = `{${prefix}b${i}}s`;
    try {
      await lastValueFrom(client.emit(a, {}));
      await lastValueFrom(client.emit(b, {}));
      cluster.freeze(masterA);
      let done = false;
      const frozen = lastValueFrom(client.emit(a, {})).then(
        () => 'written',
        (err: Error) => err.message,
      );
      void frozen.finally(() => (done = true));
      // Meanwhile the other shard fails over: its emits meet MOVED, followed and retried, until the frozen one ends.
      const failover = cluster.failover(`${prefix}${b}`);
      while (!done) await lastValueFrom(client.emit(b, {})).catch(() => undefined);
      await failover;
      const message = await frozen;
      expect(message).toMatch(/no answer within 2000 ms/);
      // Never retried: it was sent once to a master that did not answer. Before the fix it named the other shard's MOVED.
      expect(message).not.toMatch(/retried until then/);
    } finally {
      cluster.thaw(masterA);
      await client.close();
    }
  }, 90_000);
});

describe('a shard lost entirely, for longer than commandTimeoutMs (review-k)', () => {
  it('pipelines, MULTI and emits end at their deadline, and an emit says what the cluster answered meanwhile', async () => {
    const prefix = uniquePrefix();
    const key = `{${prefix}}s`;
    const conn = openCommandConnection(resolveConnection(cluster.urls), 'outage', 2000);
    const client = new RedisStreamsClient({ connection: cluster.urls, keyPrefix: prefix, commandTimeoutMs: 2000 });
    // With a retention policy an emit's first write of a stream goes out as a pipeline (XADD and its trim).
    const trimming = new RedisStreamsClient({
      connection: cluster.urls,
      keyPrefix: prefix,
      commandTimeoutMs: 2000,
      retention: { safe: true, maxLen: 1000 },
    });
    try {
      await conn.set(key, '1');
      await lastValueFrom(client.emit(`{${prefix}}warm`, {}));
      await lastValueFrom(trimming.emit(`{${prefix}}warm`, {}));
      const { master, replica } = await cluster.replicaOf(key);
      await cluster.kill(replica);
      await cluster.kill(master);
      await waitFor(async () => /cluster_state:fail/.test((await cluster.node(cluster.live()[0]!).cluster('INFO')) as string), {
        timeoutMs: 30_000,
        message: 'the cluster down',
      });
      // How long each took, from one start: printed, not asserted (a busy machine's timers run late).
      const began = performance.now();
      const took: Record<string, number> = {};
      const timed = <T>(name: string, work: Promise<T>): Promise<T> => work.finally(() => (took[name] = performance.now() - began));
      const failure = (err: Error) => err.message;
      const [pipeline, multi, emitted, trimmed] = await Promise.all([
        timed('pipeline', conn.pipeline().xadd(key, '*', 'a', '1').incr(`${key}:n`).exec().then(outcomes)),
        timed(
          'multi',
          conn
            .multi()
            .xadd(key, '*', 'a', '1')
            .exec()
            .then(outcomes, (err: Error) => [err.message]),
        ),
        timed(
          'emit',
          lastValueFrom(client.emit(`{${prefix}}orders`, {})).then(() => 'written', failure),
        ),
        timed(
          'trimmed',
          lastValueFrom(trimming.emit(`{${prefix}}kept`, {})).then(() => 'written', failure),
        ),
      ]);
      // Each command's deadline counts from its first send. Re-sent after each redirection (every 100 ms through
      // CLUSTERDOWN), a pipeline's commands got a fresh one each time, so it never fired: they ended only when ioredis'
      // redirections ran out ("Connection is closed.", 2.3 times the deadline). "Command timed out" is the deadline's.
      console.log(`cluster outage figures: ${JSON.stringify({ pipeline, multi, tookMs: took })}`);
      // The deadline fired (on the old code no command did); a command beside it may end on a closed connection then.
      expect(pipeline).toHaveLength(2);
      expect(pipeline).toContain('Command timed out');
      for (const outcome of pipeline) expect(outcome).toMatch(/^(Command timed out|Connection is closed\.)$/);
      // A MULTI may also end on a closed connection ioredis does not retry (sooner, or as before: not told apart here).
      expect(multi).toHaveLength(1);
      expect(multi[0]).toMatch(/^(Command timed out|Connection is closed\.)$/);
      expect(trimmed).toMatch(/no answer within 2000 ms/);
      // Not a silence: Redis refused, and the message says so.
      expect(emitted).toMatch(/no answer within 2000 ms \(retried until then, the last error: (CLUSTERDOWN|MOVED|Connection is closed)/);
    } finally {
      conn.disconnect();
      await Promise.all([client.close(), trimming.close()]);
    }
  }, 120_000);
});
