/**
 * The reclaim step's cost must not grow with the work: a dead peer's large PEL is taken over a
 * batch per beat, with parks in between (new entries never wait for the whole PEL), and one
 * reader's idle reclaim of N streams is one pipelined round trip, not N.
 */
import { groupOnNewStream } from './support/backlog.js';
import { parseInfo } from './support/redis-info.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

const FANNED = 40;
/** The fan's partitions, and StreamsController's orders and payments. */
const STREAMS = FANNED + 2;

/** The fan's handler: `fan` in FANNED partitions, recording into the app's Recorder. */
const FAN_HANDLERS = [{ pattern: 'fan', extras: { partitions: FANNED } }];

/** 4 × 64 partitions, and StreamsController's two: more streams than one reclaim round takes (200). */
const WIDE_HANDLERS = ['wa', 'wb', 'wc', 'wd'].map((pattern) => ({ pattern, extras: { partitions: 64 } }));
const WIDE = 4 * 64 + 2;

/** Server-side counters: XAUTOCLAIM and XREADGROUP calls, and read events (one per pipeline a client sends, however many commands it holds). */
async function counters(info: () => Promise<string>): Promise<{ autoClaims: number; parks: number; reads: number }> {
  const stats = parseInfo(await info());
  const calls = (command: string) => Number(/calls=(\d+)/.exec(stats[`cmdstat_${command}`] ?? '')?.[1] ?? 0);
  return { autoClaims: calls('xautoclaim'), parks: calls('xreadgroup'), reads: Number(stats['total_reads_processed']) };
}

describe('reclaim keeps its cost per beat', () => {
  it('takes over a dead peer’s large PEL with parks in between: an entry written meanwhile is handled long before the PEL is done', async () => {
    const r = redis.client();
    const { prefix, key } = await groupOnNewStream(r);
    const DEAD = 20_000;
    const pipeline = r.pipeline();
    for (let i = 0; i < DEAD; i++) pipeline.xadd(key, '*', 'n', String(i));
    await pipeline.exec();
    await r.xreadgroup('GROUP', 'g', 'dead', 'COUNT', DEAD, 'STREAMS', key, '>');
    let fresh: Promise<string | null> | undefined;
    const app = await start({ connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 1000, minIdleMs: 300 });
    // The first reclaimed entry in hand: a new entry is written, while 19,999 wait to be taken over.
    app.recorder.behavior = () => void (fresh ??= r.xadd(key, '*', 'n', 'fresh'));
    await waitFor(() => app.settled.length >= DEAD + 1, {
      message: 'the dead peer’s PEL and the new entry settled',
      timeoutMs: 30_000,
      progress: () => app.settled.length,
    });
    const freshId = await fresh!;
    const before = app.settled.findIndex((e) => e.id === freshId);
    // One beat reclaims one batch (100) and parks (at once) before the next: the new entry comes
    // within a few batches. Before, it waited for all 20,000 (reclaim looped until the cursor was 0-0).
    expect(before).toBeGreaterThanOrEqual(0);
    expect(before).toBeLessThan(DEAD / 4);
    expect(app.settled.every((e) => e.outcome === 'acked')).toBe(true);
    expect(await r.xpending(key, 'g')).toEqual([0, null, null, null]);
    // The wait above fails on a 30 s stall; this bounds a hang.
  }, 600_000);

  it('reclaims N idle streams in one pipelined round trip per beat, one XAUTOCLAIM per stream', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    // The sweep's own cost (where the read claims, see redis8-claim-on-read, sweeps are rarer): the path every server takes.
    const app = await start(
      { connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 100, minIdleMs: 1000, newerCommands: false },
      { handlers: FAN_HANDLERS },
    );
    // Only this test's server is counted: CONFIG RESETSTAT zeroes both counters.
    await admin.config('RESETSTAT');
    const info = () => admin.call('INFO', 'commandstats', 'stats') as Promise<string>;
    let polls = 0;
    const before = await counters(info);
    await waitFor(async () => (polls++, (await counters(info)).autoClaims - before.autoClaims >= 10 * STREAMS), {
      message: 'ten idle beats',
      intervalMs: 20,
    });
    const after = await counters(info);
    polls++;
    // An idle beat is a reclaim then a park that times out: parks count the beats.
    const beats = after.parks - before.parks;
    const claims = after.autoClaims - before.autoClaims;
    expect(beats).toBeGreaterThanOrEqual(9);
    // One XAUTOCLAIM per stream per beat (the beat under way may have sent its reclaim, not yet its park).
    expect(claims).toBeLessThanOrEqual((beats + 1) * STREAMS);
    // Every read event besides this test's INFOs: per beat, the reclaim's pipeline, the re-sent park, a little bookkeeping
    // (3 on a quiet machine; 8.2 once in CI, where a busy machine splits a pipeline's bytes over several reads and
    // slower beats carry more of the timers' bookkeeping). Sequential XAUTOCLAIMs cost a read event each: 42 per beat
    // here. Half of that tells the two apart, whatever the machine's load.
    expect((after.reads - before.reads - polls) / beats).toBeLessThan(STREAMS / 2);
    expect(app.recorder.calls).toEqual([]);
  });

  it('sweeps a large stream set in rounds of at most 200 streams, a park after each', async () => {
    const prefix = uniquePrefix();
    const admin = redis.client();
    await start(
      { connection: redis.url, group: 'g', consumer: 'live', keyPrefix: prefix, blockMs: 100, minIdleMs: 1000 },
      { handlers: WIDE_HANDLERS },
    );
    await admin.config('RESETSTAT');
    const info = () => admin.call('INFO', 'commandstats', 'stats') as Promise<string>;
    await waitFor(async () => (await counters(info)).autoClaims >= 5 * WIDE, { message: 'five idle sweeps', intervalMs: 20 });
    const { autoClaims, parks } = await counters(info);
    // Each sweep: a round of 200 streams, a park that does not block, a round of the other 58, a park that does.
    // In one round (no park between), the sweep would cost one park per 258 claims.
    expect(autoClaims).toBeLessThanOrEqual((parks + 1) * 200);
    // The last sweep's second round may be counted before its park is.
    expect(parks).toBeGreaterThanOrEqual(Math.floor(autoClaims / WIDE) * 2 - 1);
  });
});
