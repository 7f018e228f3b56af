/**
 * The fast park (Lanes.readyToPark: no prepareBlocking promise per park on a connected
 * single-node lane) stays on after a park was lost: a lost park marks the lane stale, which
 * only a cluster lane reads and clears.
 */
import { waitParked } from './support/parked.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

for (const kill of [false, true])
  it(`${kill ? 'after a lost park on one node' : 'control, no kill'}: parks use the fast path (no prepareBlocking per park)`, async () => {
    const app = await start({
      connection: redis.url,
      group: 'g',
      consumer: 'st',
      keyPrefix: uniquePrefix(),
      blockMs: 100,
      minIdleMs: 60_000,
    });
    const r = redis.client();
    await waitParked(r, 'st:blocking');
    const row = String(await r.call('CLIENT', 'LIST', 'TYPE', 'normal'))
      .split('\n')
      .find((l) => l.includes('st:blocking'))!;
    if (kill) await r.client('KILL', 'ID', /\bid=(\d+)/.exec(row)![1]!);
    const first = await r.xadd(app.key(), '*', 'n', '1');
    await waitFor(() => app.settled.some((e) => e.id === first), { message: 'entry after the kill' });
    const lanes = (
      app.server as unknown as { engine: { run: { readers: { lanes: { prepareBlocking: (...a: unknown[]) => Promise<boolean> } }[] } } }
    ).engine.run.readers[0]!.lanes;
    let prepares = 0;
    const orig = lanes.prepareBlocking.bind(lanes);
    lanes.prepareBlocking = (...a: unknown[]) => (prepares++, orig(...a));
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      ids.push((await r.xadd(app.key(), '*', 'n', String(i)))!);
      await waitFor(() => app.settled.some((e) => e.id === ids.at(-1)), { message: `entry ${i}` });
    }
    expect(prepares).toBe(0);
  });
