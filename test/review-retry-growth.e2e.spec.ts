import { retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

const lines = () => {
  const all: string[] = [];
  const keep = (m: unknown) => all.push(String(m));
  return { all, logger: { log: keep, warn: keep, error: keep, debug: () => {}, verbose: () => {} } };
};

async function write(key: string, from: number, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let at = from; at < from + count; at += 2000) {
    const pipeline = redis.client().pipeline();
    for (let n = at; n < Math.min(at + 2000, from + count); n++) pipeline.xadd(key, '*', 'data', JSON.stringify({ n }));
    ids.push(...(await pipeline.exec())!.map(([, id]) => id as string));
  }
  return ids;
}

const redisCpu = async () => {
  const info = await redis.client().info('cpu');
  const f = (n: string) => Number(new RegExp(`${n}:([\\d.]+)`).exec(info)![1]);
  return f('used_cpu_sys') + f('used_cpu_user');
};

const cmdStats = async () => {
  const info = await redis.client().info('commandstats');
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) calls[m[1]!] = Number(m[2]);
  return calls;
};

describe('review: growth with many entries waiting', () => {
  it('entries adopted from a stopped peer count against maxWaitingRetries: the survivor keeps reading new entries', async () => {
    const prefix = uniquePrefix();
    const opts = {
      connection: redis.connection,
      group: 'g',
      keyPrefix: prefix,
      blockMs: 200,
      minIdleMs: 1500,
      leaseRenewMs: 300,
      batchSize: 500,
      retry: { backoff: { type: 'fixed', delayMs: 600_000 } },
    } as const;
    const a = await start({ ...opts, consumer: 'a' });
    a.recorder.behavior = () => {
      throw new Error('down');
    };
    const key = a.key();
    await write(key, 0, 2000);
    await waitFor(() => a.settled.filter((e) => e.outcome === 'failed').length === 2000, {
      message: '2000 waiting on a',
      timeoutMs: 60_000,
    });
    const log = lines();
    const b = await start({ ...opts, consumer: 'b', maxWaitingRetries: 1000 }, { logger: log.logger as never });
    b.recorder.behavior = () => undefined;
    await a.close();
    await waitFor(
      async () => {
        const rows = (await redis.client().xpending(key, 'g', '-', '+', 3000)) as [string, string][];
        return rows.filter((r) => r[1] === 'b').length === 2000;
      },
      { message: 'b adopted the 2000', timeoutMs: 30_000 },
    );
    const fresh = (await redis.client().xadd(key, '*', 'data', JSON.stringify({ n: 99_999 })))!;
    let handled = true;
    try {
      await waitFor(() => b.settled.some((e) => e.id === fresh), { message: 'a new entry handled by b', timeoutMs: 8000 });
    } catch {
      handled = false;
    }
    console.log(
      'cap lines:',
      log.all.filter((l) => l.includes('maxWaitingRetries')),
    );
    expect(handled, 'new entry handled by the survivor while it holds 2000 adopted waits (cap 1000)').toBe(true);
  }, 120_000);

  it('idle consumer with 20k waiting (default minIdleMs/leaseRenewMs): Redis CPU and commands per second, vs 0 waiting', async () => {
    const prefix = uniquePrefix();
    const app = await start({
      connection: redis.connection,
      group: 'g',
      keyPrefix: prefix,
      batchSize: 500,
      retry: { backoff: { type: 'fixed', delayMs: 3_600_000 } },
    });
    app.recorder.behavior = () => {
      throw new Error('down');
    };
    const measure = async (label: string) => {
      const [c0, s0, n0] = [await redisCpu(), await cmdStats(), process.cpuUsage()];
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, 15_000));
      const secs = (performance.now() - t0) / 1000;
      const [c1, s1, n1] = [await redisCpu(), await cmdStats(), process.cpuUsage(n0)];
      const deltas = Object.fromEntries(
        Object.entries(s1)
          .map(([k, v]) => [k, Math.round((v - (s0[k] ?? 0)) / secs)])
          .filter(([, v]) => (v as number) > 0),
      );
      console.log(
        label,
        `redis cpu ${(((c1 - c0) / secs) * 100).toFixed(1)}%`,
        `node cpu ${(((n1.user + n1.system) / 1e6 / secs) * 100).toFixed(1)}%`,
        'cmds/s',
        JSON.stringify(deltas),
      );
    };
    await measure('0 waiting');
    await write(app.key(), 0, 20_000);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'failed').length === 20_000, {
      message: '20k waiting',
      timeoutMs: 240_000,
    });
    expect(await redis.client().zcard(retrySetKey(app.key(), 'g'))).toBe(20_000);
    await measure('20k waiting');
  }, 400_000);
});
