// The charts' past kept by the dashboard's process (figure-history.ts), on an injected clock: an hour kept
// and no more, one ring per stream of a fixed size, a cap on streams, rates from the counters' differences.
import { resolveDashboardOptions } from '../libs/redis-streams/src/dashboard/dashboard-options.js';
import { FigureHistory, RING_BYTES, SLOT_BYTES } from '../libs/redis-streams/src/dashboard/figure-history.js';

const T0 = 1_800_000_000_000;
const sample = (lag: number, added: number, read: number | null = added - lag) => ({ lag, pending: 1, dead: 0, added, read });

describe("the dashboard's figure history", () => {
  it('keeps the last hour at one point an interval, forgets what is older, and its memory is fixed', () => {
    const h = new FigureHistory({ intervalMs: 15_000, keepMs: 3_600_000, streams: 1_000 });
    // Two hours of samples, 10 entries a second produced, the lag rising by 1 a sample.
    for (let i = 0; i < 480; i++) h.record('orders', T0 + i * 15_000, sample(i, i * 150));
    const now = T0 + 479 * 15_000;
    const s = h.series(['orders'], now);
    expect(s.at).toHaveLength(241);
    expect(now - s.at[0]!).toBeLessThanOrEqual(3_600_000);
    expect(s.lag.at(-1)).toBe(479);
    expect(s.lag[0]).toBe(479 - 240);
    // The oldest kept point's rate needs the one before it, which the ring no longer holds.
    expect(s.produced[0]).toBeNull();
    expect(new Set(s.produced.slice(1))).toEqual(new Set([10]));
    expect(new Set(s.consumed.slice(1).map((c) => c!.toFixed(3)))).toEqual(new Set([(149 / 15).toFixed(3)]));
    expect(h.footprint).toEqual({ streams: 1, bytes: 241 * SLOT_BYTES + RING_BYTES + 'orders'.length });
  });

  it('sums the streams asked for per interval; a counter that fell, or a read count unknown, gives no rate', () => {
    const h = new FigureHistory({ intervalMs: 1_000, keepMs: 10_000, streams: 10 });
    h.record('a', T0, sample(5, 100));
    h.record('b', T0 + 10, sample(7, 50));
    h.record('a', T0 + 1_000, sample(6, 110));
    h.record('b', T0 + 1_010, sample(3, 40)); // made again: its counter fell
    h.record('a', T0 + 2_000, sample(6, 120, null));
    const s = h.series(['a', 'b'], T0 + 2_000);
    expect(s.lag).toEqual([12, 9, 6]);
    expect(s.produced).toEqual([null, null, 10]);
    expect(s.consumed).toEqual([null, null, null]);
    expect(h.series(['a'], T0 + 2_000).produced).toEqual([null, 10, 10]);
    // A later sample in the same interval replaces the earlier one.
    h.record('a', T0 + 2_500, sample(9, 125));
    expect(h.series(['a'], T0 + 2_999).lag.at(-1)).toBe(9);
    expect(h.has('a', T0 + 2_999)).toBe(true);
    expect(h.has('a', T0 + 3_000)).toBe(false);
  });

  it('keeps at most `streams` streams, forgetting the one seen least recently', () => {
    const h = new FigureHistory({ intervalMs: 1_000, keepMs: 60_000, streams: 100 });
    for (let i = 0; i < 10_000; i++) h.record(`s${i}`, T0, sample(1, 1));
    expect(h.footprint.streams).toBe(100);
    expect(h.footprint.bytes).toBe(
      100 * (61 * SLOT_BYTES + RING_BYTES) + [...Array(100).keys()].reduce((n, i) => n + `s${9900 + i}`.length, 0),
    );
    expect(h.series(['s0'], T0).at).toEqual([]);
    expect(h.series(['s9999'], T0).lag).toEqual([1]);
  });
  it("a page's read of a stream the history has no room for is not kept, and forgets nobody's past (review finding)", () => {
    const h = new FigureHistory({ intervalMs: 1_000, keepMs: 60_000, streams: 2 });
    for (let i = 0; i < 5; i++) for (const s of ['a', 'b']) h.record(s, T0 + i * 1_000, sample(i, i));
    // Pages past the first streams: read, but not kept.
    h.record('c', T0 + 5_000, sample(1, 1), { admit: false });
    expect(h.series(['a'], T0 + 5_000).lag).toEqual([0, 1, 2, 3, 4]);
    expect(h.series(['c'], T0 + 5_000).at).toEqual([]);
    // A stream already kept: a page's read is kept.
    h.record('b', T0 + 5_000, sample(9, 9), { admit: false });
    expect(h.series(['b'], T0 + 5_000).lag.at(-1)).toBe(9);
  });
});

describe('the history option', () => {
  it('takes defaults, false, or bounded values, and names the option it refuses', () => {
    expect(resolveDashboardOptions({}).history).toEqual({ intervalMs: 15_000, keepMs: 3_600_000, streams: 1_000 });
    expect(resolveDashboardOptions({ history: false }).history).toBeNull();
    expect(resolveDashboardOptions({ history: { intervalMs: 1_000 } }).history).toEqual({
      intervalMs: 1_000,
      keepMs: 3_600_000,
      streams: 1_000,
    });
    const refused: [unknown, RegExp][] = [
      [true, /"dashboard.history": must be false or \{ intervalMs, keepMs, streams \}/],
      [{ intervalMs: 0 }, /"dashboard.history.intervalMs"/],
      [{ keepMs: 1_000, intervalMs: 2_000 }, /"dashboard.history.keepMs": must be at least intervalMs/],
      [{ keepMs: 3_600_000, intervalMs: 100 }, /"dashboard.history.keepMs": keeps at most 10000 intervals/],
      [{ streams: 1_000_000 }, /"dashboard.history.streams"/],
      [{ interval: 5 }, /"dashboard.history.interval"/],
      // Each bound alone, the product not: 100,000 streams × 10,001 slots would be 36 GB (review finding).
      [{ streams: 100_000, keepMs: 10_000_000, intervalMs: 1_000 }, /"dashboard.history": .*bytes.*at most 268,435,456/],
      // Each stream's ring costs its objects too, not only its slots (measured ~750 bytes): 266 MB of slots took 336 MB.
      [{ streams: 100_000, keepMs: 1_095_000, intervalMs: 15_000 }, /"dashboard.history": .*368,800,000 bytes/],
      [{ streams: 7_244, keepMs: 3_600_000, intervalMs: 3_600 }, /"dashboard.history": .*268,462,640 bytes/],
    ];
    // 256 MiB is the cap: 7,243 streams of an hour at 3.6 s is under it (268,425,580 bytes), 7,244 over.
    expect(resolveDashboardOptions({ history: { streams: 7_243, keepMs: 3_600_000, intervalMs: 3_600 } }).history?.streams).toBe(7_243);
    for (const [history, error] of refused)
      expect(() => resolveDashboardOptions({ history } as Parameters<typeof resolveDashboardOptions>[0])).toThrow(error);
  });
});
