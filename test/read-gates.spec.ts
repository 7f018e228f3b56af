/**
 * The park's read gates (consumer/intake): the pause and a pattern's rate limit, against their
 * interface (ReadGate, chained by throughGates). The read behind them is the test's (it records
 * what it was asked); the grants are a real Redis'.
 */
import { randomUUID } from 'node:crypto';
import { NEVER, Subject } from 'rxjs';
import { ClaimGate } from '../libs/redis-streams/src/consumer/intake/claim-gate.js';
import { PauseGate } from '../libs/redis-streams/src/consumer/intake/pause-gate.js';
import { RateGate } from '../libs/redis-streams/src/consumer/intake/rate-gate.js';
import { RateLimiter } from '../libs/redis-streams/src/consumer/intake/rate-limiter.js';
import { throughGates, type ReadAsk, type ReadGate } from '../libs/redis-streams/src/consumer/intake/read-gate.js';
import { StopSignal } from '../libs/redis-streams/src/consumer/stop-signal.js';
import { resolveServerOptions } from '../libs/redis-streams/src/options/server-options.js';
import { Lanes } from '../libs/redis-streams/src/redis/connection/lanes.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const opened: Lanes[] = [];
afterEach(async () => {
  for (const lanes of opened.splice(0)) await lanes.close();
});

const entries = (n: number): StreamEntry[] =>
  Array.from({ length: n }, (_, i) => ({ stream: 'a', id: `1-${i}`, fields: [], deliveryCount: 1 }) as StreamEntry);

/** The read behind the gates: answers each ask with the next of `answers` (default: nothing), recording the asks. */
function reader(...answers: number[]) {
  const asks: Omit<ReadAsk, 'wake$'>[] = [];
  const read = async ({ wake$: _, ...ask }: ReadAsk) => {
    asks.push(ask);
    return { entries: entries(Math.min(answers.shift() ?? 0, ask.count)) };
  };
  return { asks, read };
}

const ask = (o: Partial<ReadAsk> = {}): ReadAsk => ({
  streams: ['a', 'b'],
  count: 10,
  blockMs: 5_000,
  ahead: false,
  beatMs: 5_000,
  wake$: NEVER,
  ...o,
});

/** A limiter of its own pattern's name on the test's Redis, `max` per minute; the stop is the test's. */
function limiterOf(max: number, stop = new StopSignal()) {
  const options = resolveServerOptions({ connection: redis.url, group: 'g', consumer: 'c', telemetry: false });
  const lanes = new Lanes({ connection: options.connection, name: `gates:${randomUUID().slice(0, 8)}`, onError: () => {} });
  opened.push(lanes);
  const limits = new StreamCommands(lanes.command, 'g').rateLimits;
  return new RateLimiter({ limits, name: `t:${randomUUID().slice(0, 8)}`, limit: { max, perMs: 60_000 }, stop });
}

describe('PauseGate', () => {
  it('reads the streams not paused; with every stream paused, reads nothing and waits for a change, at most the park', async () => {
    let paused: string[] = [];
    const changed$ = new Subject<void>();
    const gate = new PauseGate({ readable: () => ['a', 'b'].filter((s) => !paused.includes(s)), changed$ });
    const { asks, read } = reader();
    const park = throughGates([gate], read);
    await park(ask());
    paused = ['a'];
    await park(ask());
    expect(asks.map((a) => a.streams)).toEqual([['a', 'b'], ['b']]);
    paused = ['a', 'b'];
    const waited = park(ask({ wake$: changed$, blockMs: 60_000 }));
    let done = false;
    void waited.then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    changed$.next();
    expect(await waited).toEqual({ entries: [] });
    // Bounded by the park's own length when nothing changes.
    expect(await park(ask({ blockMs: 20 }))).toEqual({ entries: [] });
    expect(asks).toHaveLength(2);
  });
});

describe('RateGate (a real Redis window)', () => {
  it('takes grants before the read, reads that many without BLOCK, and gives back what the read did not use', async () => {
    const limiter = limiterOf(3);
    const { asks, read } = reader(1);
    const park = throughGates([new RateGate(limiter)], read);
    expect((await park(ask())).entries).toHaveLength(1);
    expect(asks).toEqual([{ streams: ['a', 'b'], count: 3, blockMs: 0, ahead: false, beatMs: 5_000 }]);
    // Two of the three went back: the window has two left.
    const next = await limiter.acquire(10);
    expect(next.grants).toBe(2);
  });

  it('with nothing waiting: a park for one entry, whose grant is taken when it arrives; a read ahead never parks', async () => {
    const limiter = limiterOf(2);
    const { asks, read } = reader(0, 1, 0);
    const park = throughGates([new RateGate(limiter)], read);
    expect((await park(ask())).entries).toHaveLength(1);
    expect(asks.map((a) => [a.count, a.blockMs])).toEqual([
      [2, 0],
      [1, 5_000],
    ]);
    // The arrival took one grant (the refund gave both back first): one left.
    const left = await limiter.acquire(10);
    expect(left.grants).toBe(1);
    await limiter.refund(left, 0);
    expect((await park(ask({ ahead: true }))).entries).toHaveLength(0);
    expect(asks).toHaveLength(3);
  });

  it('no grant: nothing is read, the beat waits (a wake ends it), and an arrival whose grant the stop kept from coming is in hand', async () => {
    const stop = new StopSignal();
    const limiter = limiterOf(1, stop);
    expect((await limiter.acquire(1)).grants).toBe(1);
    const { asks, read } = reader(1);
    const wake$ = new Subject<void>();
    const park = throughGates([new RateGate(limiter)], read);
    const waiting = park(ask({ wake$, blockMs: 60_000 }));
    await new Promise((r) => setTimeout(r, 50));
    wake$.next();
    expect(await waiting).toEqual({ entries: [] });
    expect(asks).toHaveLength(0);
    // An entry a park brought while the window is full: its grant waited for, until the stop.
    const parked = throughGates(
      [
        new RateGate({
          acquire: async () => ({ grants: 1, waitMs: 0, prefix: 'p' }),
          refund: async () => {},
          takeOne: () => limiter.takeOne(),
        }),
      ],
      reader(0, 1).read,
    );
    const arriving = parked(ask());
    await new Promise((r) => setTimeout(r, 50));
    stop.stop('stopping');
    expect(await arriving).toEqual({ entries: entries(1), inHand: true });
  });

  it('behind a pause: a paused reader takes no grant', async () => {
    const limiter = limiterOf(1);
    const gates: ReadGate[] = [new PauseGate({ readable: () => [], changed$: NEVER }), new RateGate(limiter)];
    const { asks, read } = reader(1);
    expect(await throughGates(gates, read)(ask({ blockMs: 10 }))).toEqual({ entries: [] });
    expect(asks).toHaveLength(0);
    expect((await limiter.acquire(1)).grants).toBe(1);
  });
});

describe('RateGate and ClaimGate together (the read claims, Redis 8.4+)', () => {
  it("a rate-limited reader over a dead peer's idle backlog claims its grants' worth every other park, never one entry with a blocking CLAIM (review finding: 623 reads and 300 XACKs where 58 and 16 did)", async () => {
    // The read behind the gates: a claim read brings `count` idle entries of the backlog (delivery 2); a plain one, nothing new.
    let backlog = 100;
    const asks: Omit<ReadAsk, 'wake$' | 'kept'>[] = [];
    const read = async ({ wake$: _, kept, ...a }: ReadAsk) => {
      asks.push(a);
      if (a.claimMinIdleMs === undefined) return { entries: [] };
      const n = Math.min(backlog, a.count);
      backlog -= n;
      const claimed = Array.from(
        { length: n },
        (_, i) => ({ stream: 'a', id: `2-${backlog + i}`, fields: [], deliveryCount: 2 }) as StreamEntry,
      );
      return { entries: kept ? kept(claimed) : claimed };
    };
    const claim = new ClaimGate({ offer: { claimsOnRead: () => true }, minIdleMs: 3_000, custody: { heldOn: () => new Set<string>() } });
    const park = throughGates([new RateGate(limiterOf(1_000)), claim], read);
    const brought: number[] = [];
    for (let i = 0; i < 6; i++) brought.push((await park(ask({ count: 20 }))).entries.length);
    // A park that claimed is followed by one that reads new entries only, without BLOCK; then the next claims again.
    expect(brought).toEqual([20, 0, 20, 0, 20, 0]);
    expect(asks.filter((a) => a.claimMinIdleMs !== undefined).map((a) => [a.count, a.blockMs])).toEqual([
      [20, 0],
      [20, 0],
      [20, 0],
    ]);
    expect(asks.every((a) => a.blockMs === 0)).toBe(true);
  });
});
