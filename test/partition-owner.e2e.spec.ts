import { PartitionOwner } from '../libs/redis-streams/src/consumer/tenure/partition-owner.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { OwnershipCommands } from '../libs/redis-streams/src/redis/tenure/ownership-commands.js';
import { captureLogs } from './support/logs.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { freezeServer } from './support/freeze.js';
import { startRedis } from './support/redis-server.js';
import { waitFor } from './support/wait-for.js';

// An ordered partition's ownership against a real Redis (issue 48: what the stalled cluster failover test showed).
const redis = useRedis({ standalone: true });

function owner(
  stream: string,
  ownership: Pick<OwnershipCommands, 'beat' | 'release' | 'takeOver' | 'giveBack'>,
  extra: Partial<ConstructorParameters<typeof PartitionOwner>[0]> = {},
) {
  const { logger, lines } = captureLogs();
  const changes: number[] = [];
  const o = new PartitionOwner({
    ownership,
    stream,
    ordered: { pattern: 'orders', partition: 0, partitions: 1 },
    consumer: 'a',
    ttlMs: 1500,
    beatMs: 100,
    logger,
    onChange: () => changes.push(Date.now()),
    ...extra,
  });
  return { o, lines, changes };
}

describe('partition ownership', () => {
  it("a renewal answered after the next owned phase began (slowed by a failover) is not taken for the new phase's loss", async () => {
    const stream = `${uniquePrefix()}orders`;
    const commands = new StreamCommands(redis.client(), 'g', false);
    let gate: Promise<void> | undefined;
    const ownership: Pick<OwnershipCommands, 'beat' | 'release' | 'takeOver' | 'giveBack'> = {
      beat: async (...args) => {
        const held = gate;
        gate = undefined;
        if (held) await held;
        return commands.ownership.beat(...args);
      },
      release: (...args) => commands.ownership.release(...args),
      takeOver: (...args) => commands.ownership.takeOver(...args),
      giveBack: (...args) => commands.ownership.giveBack(...args),
    };
    const { o, lines } = owner(stream, ownership);
    expect(await o.beat()).toBe(true);
    const first = o.fence;
    let open!: () => void;
    gate = new Promise((resolve) => (open = resolve));
    // The renewal of the first phase, held on its way (its owner value is the first one).
    const late = o.beat();
    await o.release(false);
    expect(await o.beat()).toBe(true);
    const second = o.fence;
    expect(second).not.toBe(first);
    open();
    await late;
    // Redis answered the late renewal "another value owns it": that value is this process' own, of the new phase.
    expect(o.owned).toBe(true);
    expect(o.fence).toBe(second);
    expect(lines.join('\n')).not.toMatch(/lost ownership/);
    expect(await redis.client().get(`${stream}:owner:g`)).toBe(second);
  });

  it("this process' own owner value met in standby (a late beat took the partition again after a release) is taken back at the next beat, not waited out", async () => {
    const stream = `${uniquePrefix()}orders`;
    const commands = new StreamCommands(redis.client(), 'g', false);
    const { o, lines } = owner(stream, commands.ownership);
    expect(await o.beat()).toBe(true);
    const [epoch, token] = o.fence.split(' ');
    await o.release(false);
    // What a renewal sent before the release and answered after it leaves: the partition taken again under this process' token.
    const ownValue = `${Number(epoch) + 1} ${token} a`;
    await redis.client().set(`${stream}:owner:g`, ownValue, 'PX', 60_000);
    await o.beat();
    expect(await o.beat()).toBe(true);
    expect(o.fence).toBe(ownValue);
    expect(lines.join('\n')).not.toMatch(/held by another process under this consumer's name/);
  });

  it('a fenced ack sent with no owner value (the partition lost meanwhile) is refused as FENCED, not a script error', async () => {
    const stream = `${uniquePrefix()}orders`;
    const admin = redis.client();
    await admin.xgroup('CREATE', stream, 'g', '0', 'MKSTREAM');
    const id = (await admin.xadd(stream, '*', 'n', '1'))!;
    await admin.xreadgroup('GROUP', 'g', 'a', 'STREAMS', stream, '>');
    const commands = new StreamCommands(admin, 'g', false);
    await expect(commands.ackFenced(stream, [id], '')).rejects.toThrow(
      /^FENCED this consumer no longer owns the partition at epoch \(none\)/,
    );
    expect(((await admin.xpending(stream, 'g')) as unknown[])[0]).toBe(1);
  });

  it('a loop that makes no progress past stallMs: the lease is no longer renewed (said once), it runs out on Redis, and the owner stops starting', async () => {
    const stream = `${uniquePrefix()}orders`;
    const commands = new StreamCommands(redis.client(), 'g', false);
    let stalledFor = 0;
    const { o, lines, changes } = owner(stream, commands.ownership, { stalledForMs: () => stalledFor, stallMs: 1000 });
    expect(await o.beat()).toBe(true);
    const renewals = o.renewals$.subscribe();
    try {
      const ownerKey = `${stream}:owner:g`;
      // Renewed while it makes progress: the TTL keeps coming back up.
      await waitFor(async () => (await redis.client().pttl(ownerKey)) > 1400, { message: 'a renewal' });
      stalledFor = 5000;
      await waitFor(() => lines.some((l) => /its loop made no progress for 5000 ms \(more than 1000\): the lease is not renewed/.test(l)), {
        message: 'the stall told',
      });
      expect(o.valid()).toBe(false);
      expect(changes.length).toBeGreaterThan(0);
      // Not renewed: the key runs out on Redis' clock, and another member may take the partition.
      await waitFor(async () => (await redis.client().exists(ownerKey)) === 0, { message: 'the lease run out', timeoutMs: 5000 });
      expect(lines.filter((l) => /made no progress/.test(l))).toHaveLength(1);
    } finally {
      renewals.unsubscribe();
    }
  });

  it('Redis frozen under an ordered worker of 4 partitions: one line per partition when renewing fails, one when it works again (not a line per beat)', async () => {
    const own = await startRedis({ standalone: true });
    const { logger, lines } = captureLogs();
    const c = new StreamConsumer({
      connection: own.url,
      group: 'g',
      consumer: 'a',
      keyPrefix: uniquePrefix(),
      blockMs: 100,
      minIdleMs: 8000,
      leaseRenewMs: 200,
      commandTimeoutMs: 300,
      logger,
    });
    try {
      await c.handle('orders', () => undefined, { ordered: true, partitions: 4 }).start();
      await waitFor(async () => (await c.health({ stats: false })).streams.filter((s) => s.ordering?.owned).length === 4, {
        message: 'the 4 partitions owned',
      });
      const failed = () => lines.filter((l) => /could not renew ownership/.test(l)).length;
      const thaw = await freezeServer(own.client());
      try {
        // Long enough for every partition's renewals to fail several times (a beat every 200 ms, each failing after 300 ms).
        await waitFor(() => failed() >= 4, { message: 'each partition told once', timeoutMs: 10_000 });
        // Then until the worker has seen Redis silent for 2 s: ~5 more failed renewals of each partition.
        await waitFor(async () => (await c.health({ stats: false })).redisDownForMs >= 2000, {
          message: 'Redis down for 2 s, as the worker sees it',
        });
      } finally {
        thaw();
      }
      await waitFor(() => lines.filter((l) => /renewed ownership of .* again after \d+ failed renewal/.test(l)).length === 4, {
        message: 'each partition renewed again, told once',
      });
      expect(failed()).toBe(4);
    } finally {
      await c.close();
      await own.stop();
    }
  });
});
