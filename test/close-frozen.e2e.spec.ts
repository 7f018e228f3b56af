import { captureLogs } from './support/logs.js';
import { createGroup } from './support/backlog.js';
import { freezeServer } from './support/freeze.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

describe('close() while Redis is frozen (SIGSTOP)', () => {
  it('resolves while the server is still frozen once the handler ends; what Redis did not confirm stays pending and the log says so', async (ctx) => {
    if (!redis.owned || redis.cluster) ctx.skip(); // freezes the whole server
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const admin = redis.client();
    await createGroup(admin, key);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await admin.xadd(key, '*', 'n', String(i)))!);
    const logs = captureLogs();
    // commandTimeoutMs far past the test's timeout: only close()'s own bounds can end it while frozen.
    const app = await start(
      {
        connection: redis.url,
        group: 'g',
        consumer: 'c',
        keyPrefix: prefix,
        blockMs: 100,
        batchSize: 4,
        readAhead: false,
        commandTimeoutMs: 600_000,
      },
      { logger: logs.logger },
    );
    let release!: () => void;
    app.recorder.behavior = () => new Promise<void>((resolve) => (release = resolve));
    await waitFor(() => app.recorder.calls.length === 1, { message: 'one in hand, three waiting behind it' });
    const thaw = await freezeServer(admin);
    try {
      const closing = app.close();
      await waitFor(() => logs.lines.some((l) => l.includes('consumer "c" stopping')), { message: 'close() waiting on the handler' });
      release();
      // Thawed only after close() resolved: a close() that waits on the frozen server never resolves.
      await closing;
    } finally {
      thaw();
    }
    expect(logs.text()).toMatch(/not confirmed by Redis within \d+ ms/);
    const pending = (await redis.newClient().xpending(key, 'g', '-', '+', 10)) as [string, string][];
    // The three never started: their hand-back was not confirmed, still pending under "c".
    expect(pending.map(([id]) => id).filter((id) => id !== ids[0])).toEqual(ids.slice(1));
    const again = await start({ connection: redis.url, group: 'g', consumer: 'c', keyPrefix: prefix, blockMs: 100 });
    await waitFor(() => again.settled.length >= 3, { message: 'the unconfirmed entries delivered again' });
    expect(again.recorder.idsOf().filter((id) => id !== ids[0])).toEqual(ids.slice(1));
  });
});
