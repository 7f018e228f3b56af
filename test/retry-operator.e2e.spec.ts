import { retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { consumerOptions } from './support/consumer-options.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

const capture = () => {
  const lines: string[] = [];
  const keep = (m: unknown) => lines.push(String(m));
  return { lines, logger: { log: keep, warn: keep, error: keep, debug: () => {}, verbose: () => {} } };
};

/**
 * Watches one pending entry of `key` left to the group under `consumer` (not renewed: idle past
 * `minIdleMs`) until it has been reclaimed `times` times (its idle reset below half of it).
 */
async function reclaimsOfOneLeftEntry(key: string, consumer: string, minIdleMs: number, times: number): Promise<number> {
  const rows = async () => (await redis.client().xpending(key, 'g', '-', '+', 100)) as [string, string, number, number][];
  const id = await waitFor(async () => (await rows()).find((r) => r[1] === consumer && r[2] >= minIdleMs)?.[0], {
    message: `an entry of ${consumer} left to the group, idle past minIdleMs`,
  });
  let reclaims = 0;
  let past = true;
  await waitFor(
    async () => {
      const row = (await rows()).find((r) => r[0] === id);
      if (!row || row[1] !== consumer) throw new Error(`entry ${id} is no longer pending under ${consumer}: ${String(row)}`);
      if (past && row[2] < minIdleMs / 2) reclaims++;
      past = row[2] >= minIdleMs;
      return reclaims >= times;
    },
    { message: `entry ${id} reclaimed ${times} times` },
  );
  return reclaims;
}

/**
 * A stopped peer a's 30 failed entries waiting for a retry in 600 s, then a dead peer x's `backlog`
 * entries behind them in the stream, all idle past minIdleMs: a new consumer's first sweep meets the
 * 30 first (its cursor would pass entries not yet claimable), then takes x's batch by batch.
 */
async function waitListBehindBacklog(options: { minIdleMs: number } & Record<string, unknown>, backlog: number): Promise<void> {
  const a = await start({ ...options, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 600_000 } } });
  a.recorder.behavior = () => {
    throw new Error('downstream down');
  };
  const r = redis.client();
  const waiting = r.pipeline();
  for (let n = 0; n < 30; n++) waiting.xadd(a.key(), '*', 'data', JSON.stringify({ n }));
  await waiting.exec();
  await waitFor(() => a.settled.length === 30, { message: '30 failures' });
  await a.close();
  const more = r.pipeline();
  for (let n = 0; n < backlog; n++) more.xadd(a.key(), '*', 'data', JSON.stringify({ n }));
  await more.exec();
  await r.xreadgroup('GROUP', 'g', 'x', 'COUNT', backlog, 'STREAMS', a.key(), '>');
  const all = backlog + 30;
  await waitFor(async () => ((await r.xpending(a.key(), 'g', 'IDLE', options.minIdleMs, '-', '+', all)) as unknown[]).length === all, {
    message: 'every entry idle past minIdleMs',
  });
}

/** waitListBehindBacklog() of `backlog` entries on a prefix of its own, then consumer `b` (maxWaitingRetries 1), its log captured. */
async function bBehindBacklog(backlog: number, timing: { minIdleMs: number; leaseRenewMs: number }) {
  const options = { connection: redis.connection, group: 'g', keyPrefix: uniquePrefix(), blockMs: 100, ...timing };
  await waitListBehindBacklog(options, backlog);
  const log = capture();
  const b = await start({ ...options, consumer: 'b', maxWaitingRetries: 1 }, { logger: log.logger });
  return { b, log };
}

describe('retries under operator actions and peers', () => {
  it('entries adopted from a stopped peer count against maxWaitingRetries: past it they are left to the group with their count, and intake goes on', async () => {
    const prefix = uniquePrefix();
    const options = { connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 100, minIdleMs: 500, leaseRenewMs: 100 };
    const a = await start({ ...options, consumer: 'a', retry: { backoff: { type: 'fixed', delayMs: 600_000 } } });
    a.recorder.behavior = () => {
      throw new Error('downstream down');
    };
    const pipeline = redis.client().pipeline();
    for (let n = 0; n < 30; n++) pipeline.xadd(a.key(), '*', 'data', JSON.stringify({ n }));
    await pipeline.exec();
    await waitFor(() => a.settled.length === 30, { message: '30 failures' });
    await a.close();
    const log = capture();
    const b = await start({ ...options, consumer: 'b', maxWaitingRetries: 10 }, { logger: log.logger });
    await waitFor(
      () => log.lines.some((l) => /entries taken from .* past this consumer's maxWaitingRetries \(10\): left to the group/.test(l)),
      {
        message: 'b to leave the rest to the group',
      },
    );
    expect(log.lines.filter((l) => /wait for their retry here \(maxWaitingRetries 10\): no new entries are read/.test(l))).toEqual([]);
    // Below the bound: 9 kept waiting here, the 21 others left to the group.
    const kept = log.lines.map((l) => /^(\d+) of \d+ entries taken from .* kept waiting here/.exec(l)?.[1]).filter(Boolean);
    expect(kept.map(Number).reduce((a, n) => a + n, 0)).toBe(9);
    // Intake goes on: a new entry is handled.
    const fresh = (await redis.client().xadd(b.key(), '*', 'data', JSON.stringify({ n: 'new' })))!;
    await waitFor(() => b.settled.some((e) => e.id === fresh && e.outcome === 'acked'), { message: 'the new entry handled' });
    // The entries left to the group come back to b each minIdleMs (Redis keeps no idle time in the
    // future): seen twice for one of them, its idle past minIdleMs then reset, the warning is not repeated.
    const reclaims = await reclaimsOfOneLeftEntry(b.key(), 'b', 500, 2);
    expect(reclaims).toBe(2);
    expect(log.lines.filter((l) => /left to the group/.test(l))).toEqual([expect.stringMatching(/^21 entries taken from /)]);
    // None of the 30 was tried by b, and each kept its one delivery, once b has stopped (between a
    // reclaim's XAUTOCLAIM and its adoption script, a count reads one higher: see docs/how-it-works.md).
    await b.close();
    expect(b.recorder.calls.map((c) => c.id)).toEqual([fresh]);
    const rows = (await redis.client().xpending(b.key(), 'g', '-', '+', 100)) as [string, string, number, number][];
    expect(rows).toHaveLength(30);
    expect(new Set(rows.map((r) => r[3]))).toEqual(new Set([1]));
  });

  it("entries left to the group ahead of a dead peer's large backlog: warned within minIdleMs, not once the backlog is done", async () => {
    const backlog = 2000;
    const { b, log } = await bBehindBacklog(backlog, { minIdleMs: 500, leaseRenewMs: 100 });
    // Each entry takes 2 ms of I/O: a floor under the backlog's time (4 s, past minIdleMs), not a wait for
    // a condition. A handler held until the warning would hold the sweep that is to write it.
    b.recorder.behavior = () => new Promise((resolve) => setTimeout(resolve, 2));
    let handledAtWarning = -1;
    await waitFor(() => log.lines.some((l) => /left to the group/.test(l)) && (handledAtWarning = b.recorder.calls.length) >= 0, {
      message: 'the warning',
      timeoutMs: 30_000,
    });
    expect(log.lines.filter((l) => /left to the group/.test(l))).toEqual([expect.stringMatching(/^30 entries taken from /)]);
    expect(handledAtWarning).toBeLessThan(backlog);
    await waitFor(() => b.recorder.calls.length >= backlog, {
      message: 'the backlog handled',
      timeoutMs: 30_000,
      progress: () => b.recorder.calls.length,
    });
    expect(b.recorder.calls).toHaveLength(backlog);
  }, 600_000);

  it('a consumer stopped in the middle of its sweep says what it left to the group', async () => {
    const backlog = 2000;
    // minIdleMs 3 s: the stop comes well before a "so far" line would.
    const { b, log } = await bBehindBacklog(backlog, { minIdleMs: 3000, leaseRenewMs: 500 });
    // Past its 50th entry the handler holds until b is closing: b is stopped mid-sweep, whatever the machine's pace.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    b.recorder.behavior = () => (b.recorder.calls.length > 50 ? held : undefined);
    try {
      await waitFor(() => b.recorder.calls.length > 50, { message: "b into x's backlog", timeoutMs: 20_000 });
      expect(log.lines.filter((l) => /left to the group/.test(l))).toEqual([]);
    } finally {
      // Closing first: the held entry is then the last one b handles. Released on a failure too (no 20 s shutdown wait).
      const closed = b.close();
      release();
      await closed;
    }
    expect(b.recorder.calls.length).toBeLessThan(backlog);
    expect(log.lines.filter((l) => /left to the group/.test(l))).toEqual([
      expect.stringMatching(/^30 entries taken from "[^"]+" wait for a retry/),
    ]);
  });

  it('XDEL of an entry waiting for its retry: reported deleted once, never run again, and its retry record goes', async () => {
    const app = await start(
      consumerOptions(redis, {
        blockMs: 100,
        minIdleMs: 600,
        leaseRenewMs: 150,
        retry: { backoff: { type: 'fixed', delayMs: 60_000 } },
      }),
    );
    app.recorder.behavior = () => {
      throw new Error('downstream down');
    };
    const id = (await redis.client().xadd(app.key(), '*', 'data', '1'))!;
    await waitFor(() => app.settled.length === 1, { message: 'the failure' });
    expect(await redis.client().zscore(retrySetKey(app.key(), 'g'), id)).not.toBeNull();
    await redis.client().xdel(app.key(), id);
    await waitFor(async () => app.deleted.includes(id) && (await redis.client().zscore(retrySetKey(app.key(), 'g'), id)) === null, {
      message: 'the deletion reported and the record gone',
    });
    expect(app.deleted.filter((d) => d === id)).toHaveLength(1);
    expect(app.recorder.calls).toHaveLength(1);
  });

  it('a policy that gives no usable delay: the log says so (not "no retry policy"), and the entry comes back once idle', async () => {
    const log = capture();
    const app = await start(
      consumerOptions(redis, {
        blockMs: 100,
        minIdleMs: 600,
        leaseRenewMs: 150,
        retry: {
          backoff: () => {
            throw new Error('policy bug');
          },
        },
      }),
      { logger: log.logger },
    );
    app.recorder.behavior = (call) => {
      if (call.deliveryCount === 1) throw new Error('first try fails');
    };
    await redis.client().xadd(app.key(), '*', 'data', '1');
    await waitFor(() => app.settled.some((e) => e.outcome === 'acked'), { message: 'the retry' });
    expect(log.lines.find((l) => l.includes('the retry policy threw: policy bug'))).toBeDefined();
    expect(log.lines.find((l) => l.includes('failed on entry'))).toMatch(
      /left pending, next try once idle 450 ms \(minIdleMs − leaseRenewMs: the retry policy gave no usable delay\)$/,
    );
  });
});
