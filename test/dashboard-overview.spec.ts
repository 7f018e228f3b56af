// The overview's words, alone (no browser, no Redis: pure functions of the API's figures): the summary
// never says "all read" beside a lag nor "connected" beside consumers without a connection, a lease is said
// in words, and the charts' gridlines are distinct and exact.
import type { ConsumerRow, GroupRow, StreamRow } from '../libs/redis-streams/src/dashboard/browser/api-replies.js';
import { axisTicks, ENTRIES, PER_SEC, type Unit } from '../libs/redis-streams/src/dashboard/browser/chart-units.js';
import { figures } from '../libs/redis-streams/src/dashboard/browser/figures.js';
import { leaseWords } from '../libs/redis-streams/src/dashboard/browser/labels.js';
import { summaryStats } from '../libs/redis-streams/src/dashboard/browser/summary-strip.js';

const consumer = (name: string, connected: boolean | null, pending = 0): ConsumerRow => ({
  name,
  pending,
  idleMs: 10,
  inactiveMs: null,
  oldestPendingId: null,
  oldestPendingIdleMs: null,
  connected,
});

const group = (lag: number | null, consumers: ConsumerRow[]): GroupRow => ({
  name: 'g',
  pending: consumers.reduce((n, c) => n + c.pending, 0),
  lastDeliveredId: '1-0',
  lag,
  lagMs: lag ? 5_000 : 0,
  firstUndeliveredId: null,
  oldestPending: null,
  consumers,
  consumerCount: consumers.length,
  consumedPerSec: null,
  retries: { waiting: 0, due: 0 },
  ordering: null,
  paused: null,
});

const stream = (name: string, groups: GroupRow[]): StreamRow => ({
  stream: name,
  length: 10,
  lastGeneratedId: '1-0',
  firstEntryId: '1-0',
  idempotency: null,
  groups,
  deadLetters: [],
  producedPerSec: null,
  producedHistory: [],
  node: null,
  delayed: { waiting: 0, nextDueInMs: null },
});

function stats(streams: StreamRow[]) {
  const o = { total: streams.length, streams, attentionItems: [] };
  return Object.fromEntries(summaryStats(o, figures(streams), 30_000).map((s) => [s.label, `${s.value} ${s.state} ${s.note}`]));
}

describe('the summary strip', () => {
  it('never says "all read" beside a lag: it says how many streams wait', () => {
    const s = stats([stream('a', [group(336, [consumer('c', true)])]), stream('b', [group(0, [consumer('c', true)])])]);
    expect(s['Lag']).toMatch(/^336 /);
    expect(s['Streams']).not.toMatch(/all read/);
    expect(s['Streams']).toBe('2 healthy 1 with lag');
    expect(stats([stream('a', [group(0, [consumer('c', true)])])])['Streams']).toBe('1 healthy all caught up');
    // A lag the server does not know (a group made before entries-read, a failover on Redis 7.0) is said so.
    expect(stats([stream('a', [group(null, [consumer('c', true)])])])['Streams']).toBe('1 healthy lag unknown');
  });

  it('never says "connected" while some consumers have no connection', () => {
    const all = [consumer('a', true), consumer('b', true)];
    expect(stats([stream('s', [group(0, all)])])['Consumers']).toBe('2 healthy all connected');
    const some = [...all, consumer('c', false), consumer('d', false)];
    expect(stats([stream('s', [group(0, some)])])['Consumers']).toBe('4 attention 2 not connected');
    // With work left behind: failing, as before.
    expect(stats([stream('s', [group(0, [...all, consumer('c', false, 3)])])])['Consumers']).toBe('3 failing 1 gone with work');
    expect(stats([stream('s', [group(0, [consumer('a', null)])])])['Consumers']).toBe('1 healthy connections unknown');
  });
});

describe('the lease, in words', () => {
  it('names the owner and whether it is this process, not the raw lease value', () => {
    expect(leaseWords({ owned: false, owner: '8 7740d336 billing-1' }, 'billing-2')).toBe('standby: billing-1 owns it (epoch 8)');
    expect(leaseWords({ owned: false, owner: '8 7740d336 billing-1' }, 'billing-1')).toBe(
      'standby: billing-1 in another process owns it (epoch 8)',
    );
    expect(leaseWords({ owned: false, owner: '' }, 'billing-1')).toBe('standby: nobody owns it now');
    expect(leaseWords({ owned: true, owner: '3 aa billing-1' }, 'billing-1')).toBe('owned here (epoch 3)');
    // A consumer name with spaces stays whole; a value of another shape is shown as it is, said so.
    expect(leaseWords({ owned: false, owner: '2 ab12 worker one' }, 'x')).toBe('standby: worker one owns it (epoch 2)');
    expect(leaseWords({ owned: false, owner: 'garbage' }, 'x')).toBe('standby: the lease reads "garbage"');
  });
});

describe("the charts' gridlines", () => {
  const labels = (peak: number, unit: Unit) => axisTicks(peak, unit).map((t) => t.label);
  const exact = (peak: number, unit: Unit, suffix: string) => {
    const ticks = axisTicks(peak, unit);
    // Distinct, each label the exact value of its line, the top at or above the peak, 2 to 6 lines.
    expect(new Set(ticks.map((t) => t.label)).size).toBe(ticks.length);
    const read = (label: string) => {
      const n = label.replace(suffix, '').replace(/,/g, '');
      return n.endsWith('k') ? Number(n.slice(0, -1)) * 1000 : Number(n);
    };
    for (const t of ticks) expect([peak, read(t.label)]).toEqual([peak, t.value]);
    expect(ticks.at(-1)!.value).toBeGreaterThanOrEqual(peak);
    expect(ticks.length).toBeGreaterThanOrEqual(2);
    expect(ticks.length).toBeLessThanOrEqual(6);
  };

  it('a rate peaking under 0.2/s labels no two lines alike, and a 0.4/s peak labels no 0.25 as 0.3', () => {
    expect(labels(0.1, PER_SEC)).toEqual(['0/s', '0.05/s', '0.1/s']);
    expect(labels(0.4, PER_SEC)).toEqual(['0/s', '0.1/s', '0.2/s', '0.3/s', '0.4/s']);
    for (const peak of [0, 0.003, 0.01, 0.04, 0.1, 0.15, 0.19, 0.2, 0.33, 0.4, 0.45, 0.7, 1, 2.5, 7, 12, 99, 450, 1234, 98_000])
      exact(peak, PER_SEC, '/s');
  });

  it('entries: whole counts where the peak allows, thousands as k', () => {
    expect(labels(503, ENTRIES)).toEqual(['0', '200', '400', '600']);
    expect(labels(0, ENTRIES)).toEqual(['0', '1']);
    for (const peak of [0, 1, 2, 3, 7, 10, 45, 503, 702, 9_999]) exact(peak, ENTRIES, '');
    // Counts: no line between two whole numbers.
    expect(labels(1, ENTRIES)).toEqual(['0', '1']);
    expect(labels(42_000, ENTRIES)).toEqual(['0', '20k', '40k', '60k']);
  });
});
