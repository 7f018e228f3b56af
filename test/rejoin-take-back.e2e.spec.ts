import type { Redis } from 'ioredis';
import { captureLogs } from './support/logs.js';
import { pendingCount } from './support/pending.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

// A failed entry taken from this consumer's pending list by hand while its loop restarts (Redis paused: a command timed
// out). The restart's rejoin must take it back as the owed-entry audit would, though the group lists the consumer
// again: on Redis 7.2+ and Valkey a read of its own (the blocked park, served after the operator's command) re-creates
// the consumer before the rejoin looks (review-r). Before, the entry was forgotten: never retried, never dead-lettered.

const redis = useRedis();
const start = useApps();

const commands: [string, (operator: Redis, key: string, id: string) => Promise<unknown>][] = [
  ['deletes the consumer (XGROUP DELCONSUMER)', (operator, key) => operator.call('XGROUP', 'DELCONSUMER', key, 'g', 'c')],
  ['acks it (XACK)', (operator, key, id) => operator.xack(key, 'g', id)],
];

describe('a failed entry taken by hand while the loop restarts', () => {
  for (const ordered of [false, true])
    for (const [what, command] of commands)
      it(`an operator ${what}: taken back at the rejoin and retried${ordered ? ' (ordered)' : ''}`, async (ctx) => {
        if (!redis.owned || redis.cluster) ctx.skip(); // pauses the whole server
        const prefix = uniquePrefix();
        const admin = redis.newClient();
        const operator = redis.newClient();
        const logs = captureLogs();
        const app = await start(
          // minIdleMs well above the pause: no peer can have claimed the entry, last seen pending here just before it.
          { connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100, commandTimeoutMs: 300, minIdleMs: 8000 },
          { logger: logs.logger, ...(ordered ? { defaults: false, handlers: [{ pattern: 'orders', extras: { ordered: true } }] } : {}) },
        );
        let failing = true;
        app.recorder.behavior = () => {
          if (failing) throw new Error('boom');
        };
        const id = (await admin.xadd(app.key(), '*', 'data', '{}', 'partitionKey', 'k1'))!;
        await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'failed'), { message: 'failed once' });
        failing = false;
        // The pause ends by itself (a paused server takes no CLIENT UNPAUSE), past commandTimeoutMs: the loop restarts.
        await admin.call('CLIENT', 'PAUSE', 1500, 'ALL');
        await command(operator, app.key(), id);
        await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'acked'), {
          message: 'retried and acked',
          timeoutMs: 20_000,
        });
        expect(app.recorder.calls.filter((c) => c.id === id).map((c) => c.deliveryCount)).toEqual([1, 2]);
        expect(await pendingCount(redis, app.key())).toBe(0);
      });
});
