/**
 * The fast park (Lanes.readyToPark skips prepareBlocking) after the blocking lane was dropped or
 * Redis restarted: a park on the new connection must still be wakeable (its client id fetched
 * again), so close() does not wait out BLOCK, and entries are neither lost nor run twice.
 */
import type { Redis } from 'ioredis';
import { waitParked } from './support/parked.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { timed, waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

const redis = useRedis();
const start = useApps();

const blockingRow = async (r: Redis, consumer: string): Promise<string | undefined> =>
  String(await r.call('CLIENT', 'LIST', 'TYPE', 'normal'))
    .split('\n')
    .find((l) => l.includes(`${consumer}:blocking`));
const idOf = (row: string | undefined) => (row ? /\bid=(\d+)/.exec(row)![1] : undefined);
// The client's own address: a new connection has a new port, where a restarted server may hand out the same id again.
const addrOf = (row: string | undefined) => (row ? /\baddr=(\S+)/.exec(row)![1] : undefined);

describe('a park after the blocking lane changed under it', () => {
  for (const how of ['kill-blocking-while-busy', 'kill-all-while-busy', 'kill-blocking-while-parked', 'restart-while-busy'] as const) {
    it(`${how}: next entries handled once, and close() wakes a BLOCK 30000 park`, async () => {
      const app = await start({
        connection: redis.url,
        group: 'g',
        consumer: 'rv',
        keyPrefix: uniquePrefix(),
        blockMs: 30_000,
        minIdleMs: 60_000,
        retryMaxDelayMs: 100,
        retryInitialDelayMs: 20,
      });
      const r = redis.client();
      let release: (() => void) | undefined;
      app.recorder.behavior = (call) =>
        (call.payload as { slow?: string }).slow ? new Promise<void>((res) => (release = res)) : undefined;
      for (let round = 0; round < 3; round++) {
        await waitParked(r, 'rv:blocking');
        const row = await blockingRow(r, 'rv');
        const before = idOf(row);
        const beforeAddr = addrOf(row);
        if (how === 'kill-blocking-while-parked') {
          await r.client('KILL', 'ID', before!);
        } else {
          const slow = await r.xadd(app.key(), '*', 'slow', String(round));
          await waitFor(() => app.recorder.calls.some((c) => c.id === slow), { message: 'slow handler running' });
          if (how === 'kill-blocking-while-busy') await r.client('KILL', 'ID', before!);
          else if (how === 'kill-all-while-busy') await r.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
          else {
            await redis.restart();
          }
          // Let the lane reconnect before the handler finishes: the next park is sent on a "ready" lane.
          await waitFor(
            async () => {
              const addr = addrOf(await blockingRow(r, 'rv').catch(() => undefined));
              return addr !== undefined && addr !== beforeAddr;
            },
            { message: 'blocking lane reconnected' },
          );
          release!();
        }
        await waitParked(r, 'rv:blocking');
        const id = await r.xadd(app.key(), '*', 'n', String(round));
        await waitFor(() => app.settled.some((e) => e.id === id), { message: `entry of round ${round}` });
      }
      await waitParked(r, 'rv:blocking');
      const { ms } = await timed(() => app.close());
      // Woken, not waited out (BLOCK is 30 s); generous for a loaded machine.
      expect(ms).toBeLessThan(10_000);
      const ids = app.recorder.calls.map((c) => c.id);
      expect(new Set(ids).size).toBe(ids.length);
      if (how !== 'restart-while-busy') expect(await pendingCount(redis, app.key())).toBe(0);
    });
  }
});
