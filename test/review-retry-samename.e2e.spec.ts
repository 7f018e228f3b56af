import type { RedisStreamsServerOptions } from 'nestjs-redis-streams';
import { captureLogs } from './support/logs.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

describe('review: a second worker under the same consumer name while an entry waits', () => {
  it('the waiting entry is retried once, not by both', async () => {
    const prefix = uniquePrefix();
    const opts: RedisStreamsServerOptions = {
      connection: redis.connection,
      group: 'g',
      consumer: 'same',
      keyPrefix: prefix,
      blockMs: 200,
      minIdleMs: 3000,
      leaseRenewMs: 400,
      retry: { backoff: { type: 'fixed', delayMs: 2000 } },
    };
    const logs = captureLogs();
    const a = await start(opts, { logger: logs.logger });
    a.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error('fails once');
    };
    const id = (await redis.client().xadd(a.key(), '*', 'data', '{"n":1}'))!;
    await waitFor(() => a.settled.some((e) => e.id === id && e.outcome === 'failed'), { message: 'failed' });
    const b = await start(opts, { logger: logs.logger });
    await waitFor(() => [...a.settled, ...b.settled].some((e) => e.id === id && e.outcome === 'acked'), {
      message: 'retried',
      timeoutMs: 10_000,
    });
    await new Promise((r) => setTimeout(r, 2000));
    const tries = [...a.recorder.calls.map((c) => `a#${c.deliveryCount}`), ...b.recorder.calls.map((c) => `b#${c.deliveryCount}`)];
    console.log(
      'tries',
      tries.join(' '),
      '| logs:',
      logs.lines
        .filter((l) => /same|wait/.test(l))
        .slice(0, 6)
        .join(' || '),
    );
    expect(tries.filter((t) => !t.endsWith('#1'))).toHaveLength(1);
  }, 30_000);
});
