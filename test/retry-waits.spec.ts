/** Entries waiting for a scheduled retry: the due clock (fake timers), their idle resets and their hand-back at a stop (a real Redis). */
import { DeliveryMarks } from '../libs/redis-streams/src/consumer/custody/delivery-marks.js';
import { Lease } from '../libs/redis-streams/src/consumer/custody/lease.js';
import type { PendingAuditDeps } from '../libs/redis-streams/src/consumer/custody/pending-audit.js';
import { markScheduled } from '../libs/redis-streams/src/consumer/settle/retry-schedule.js';
import { DueClock, handBackWaiting, touchWaiting } from '../libs/redis-streams/src/consumer/custody/retry-waits.js';
import type { SettledEvent } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { createGroup } from './support/backlog.js';
import { pendingRows } from './support/pending.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const quiet = { log: () => {}, warn: () => {}, error: () => {} };
const MIN_IDLE_MS = 30_000;
const LEASE_RENEW_MS = 10_000;
const LONG_IDLE = 50_000;

/** A clock and how often its due$ woke the loop; `stop` ends the subscription, as the reader's teardown does. */
function watched() {
  const clock = new DueClock();
  const seen = { woken: 0 };
  const sub = clock.due$.subscribe(() => seen.woken++);
  return { clock, seen, stop: () => sub.unsubscribe() };
}

describe('DueClock: when the first owed entry is due', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('nothing due: msUntil is Infinity and nothing wakes', async () => {
    const { clock, seen, stop } = watched();
    expect(clock.msUntil()).toBe(Infinity);
    clock.set(Infinity);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(seen.woken).toBe(0);
    stop();
  });

  it('set(at) wakes the loop once at `at`; a later set replaces the wake', async () => {
    const { clock, seen, stop } = watched();
    clock.set(performance.now() + 100);
    expect(clock.msUntil()).toBe(100);
    clock.set(performance.now() + 300);
    await vi.advanceTimersByTimeAsync(299);
    expect(seen.woken).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen.woken).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen.woken).toBe(1);
    stop();
  });

  it('lower(at) only ever brings the time forward', async () => {
    const { clock, seen, stop } = watched();
    clock.set(performance.now() + 500);
    clock.lower(performance.now() + 900);
    expect(clock.msUntil()).toBe(500);
    clock.lower(performance.now() + 200);
    expect(clock.msUntil()).toBe(200);
    await vi.advanceTimersByTimeAsync(200);
    expect(seen.woken).toBe(1);
    stop();
  });

  it('clear() says nothing is due and cancels the wake', async () => {
    const { clock, seen, stop } = watched();
    clock.set(performance.now() + 100);
    clock.clear();
    expect(clock.msUntil()).toBe(Infinity);
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen.woken).toBe(0);
    stop();
  });

  it('unsubscribing ends the wake (the reader’s teardown): a due time set before it never fires', async () => {
    const { clock, seen, stop } = watched();
    clock.set(performance.now() + 100);
    stop();
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen.woken).toBe(0);
    expect(clock.msUntil()).toBe(0 - 900);
  });
});

/** Entries of `key` delivered to c, idle LONG_IDLE, and the deps the retry-wait steps read. */
async function waiting(key: string, n: number) {
  const r = redis.client();
  await createGroup(r, key);
  for (let i = 0; i < n; i++) await r.xadd(key, '*', 'n', String(i));
  await r.xreadgroup('GROUP', 'g', 'c', 'COUNT', n, 'STREAMS', key, '>');
  const ids = (await pendingRows(redis, key)).map(([id]) => id);
  await r.xclaim(key, 'g', 'c', 0, ...ids, 'IDLE', LONG_IDLE, 'JUSTID');
  const commands = new StreamCommands(r, 'g');
  const marks = new DeliveryMarks();
  const deps = {
    commands,
    lease: new Lease(commands, 'c', LEASE_RENEW_MS, quiet),
    marks,
    consumer: 'c',
    minIdleMs: MIN_IDLE_MS,
    leaseRenewMs: LEASE_RENEW_MS,
    maxWaitingRetries: 50_000,
    logger: quiet,
    lookable: () => [],
    onDeleted: () => {},
    mayTakeBack: () => true,
    onGroupLost: () => {},
    onDue: () => {},
    connection: { failed: () => false, silent: () => false, answered: () => {} },
  } satisfies PendingAuditDeps;
  /** Failed here, its retry `retryInMs` from now; last seen pending under c `seenAgoMs` ago. */
  const failed = (id: string, retryInMs: number | undefined, seenAgoMs = 0) => {
    const event: SettledEvent = { stream: key, id, outcome: 'failed', deliveryCount: 1, source: 'new', retryInMs };
    marks.settled(retryInMs === undefined ? event : markScheduled(event), performance.now() - seenAgoMs);
  };
  return { ids, deps, failed };
}

const idles = async (key: string) => new Map((await pendingRows(redis, key)).map(([id, consumer, idle]) => [id, { consumer, idle }]));

describe('touchWaiting: no peer takes an entry before its retry is due', () => {
  it('resets the idle time of waiting entries not seen for long, and leaves alone the recent, the held, the due and the unscheduled ones', async () => {
    const key = `${uniquePrefix()}orders`;
    const { ids, deps, failed } = await waiting(key, 5);
    const [stale, recent, held, due, unscheduled] = ids;
    failed(stale!, 60_000, MIN_IDLE_MS);
    failed(recent!, 60_000, 0);
    failed(held!, 60_000, MIN_IDLE_MS);
    failed(due!, 0, MIN_IDLE_MS);
    failed(unscheduled!, undefined, MIN_IDLE_MS);
    deps.lease.hold([{ stream: key, id: held!, fields: [], deliveryCount: 1 }], performance.now());
    expect((await touchWaiting(deps)).size).toBe(0);
    const rows = await idles(key);
    expect(rows.get(stale!)!.idle).toBeLessThan(LONG_IDLE);
    for (const id of [recent, held, due, unscheduled]) expect(rows.get(id!)!.idle).toBeGreaterThanOrEqual(LONG_IDLE);
    // Seen just now: the next check has nothing to touch.
    await redis.client().xclaim(key, 'g', 'c', 0, stale!, 'IDLE', LONG_IDLE, 'JUSTID');
    await touchWaiting(deps);
    expect((await idles(key)).get(stale!)!.idle).toBeGreaterThanOrEqual(LONG_IDLE);
  });

  it('returns the waiting entries no longer pending under this consumer, for the audit to explain', async () => {
    const key = `${uniquePrefix()}orders`;
    const { ids, deps, failed } = await waiting(key, 2);
    for (const id of ids) failed(id, 60_000, MIN_IDLE_MS);
    await redis.client().xclaim(key, 'g', 'peer', 0, ids[0]!, 'JUSTID');
    const missing = await touchWaiting(deps);
    expect([...missing.keys()]).toEqual([key]);
    expect(missing.get(key)!.map(([id]) => id)).toEqual([ids[0]]);
    const rows = await idles(key);
    expect(rows.get(ids[0]!)!.consumer).toBe('peer');
    expect(rows.get(ids[1]!)!.idle).toBeLessThan(LONG_IDLE);
  });
});

describe('handBackWaiting: at a graceful stop, waiting entries become a peer’s at their due time', () => {
  it('gives each the idle time that reaches minIdleMs when it is due (at most minIdleMs), and leaves unscheduled ones alone', async () => {
    const key = `${uniquePrefix()}orders`;
    const { ids, deps, failed } = await waiting(key, 4);
    const [dueNow, inTen, farOff, unscheduled] = ids;
    failed(dueNow!, 0);
    failed(inTen!, 10_000);
    failed(farOff!, 10 * MIN_IDLE_MS);
    failed(unscheduled!, undefined);
    await handBackWaiting(deps);
    const rows = await idles(key);
    // Due now: a peer's at once. In 10 s: 30 s − 10 s, floored to 100 ms (never a peer's early). Past minIdleMs: idle 0.
    expect(rows.get(dueNow!)!.idle).toBeGreaterThanOrEqual(MIN_IDLE_MS);
    expect(rows.get(inTen!)!.idle).toBeGreaterThanOrEqual(MIN_IDLE_MS - 10_000 - 100);
    expect(rows.get(inTen!)!.idle).toBeLessThan(MIN_IDLE_MS);
    expect(rows.get(farOff!)!.idle).toBeLessThan(MIN_IDLE_MS - 10_000 - 100);
    expect(rows.get(unscheduled!)!.idle).toBeGreaterThanOrEqual(LONG_IDLE);
    // What a peer's reclaim sees now: only the one due.
    const [, claimed] = (await redis.client().xautoclaim(key, 'g', 'peer', MIN_IDLE_MS, '0-0', 'COUNT', 10, 'JUSTID')) as [
      string,
      string[],
    ];
    expect(claimed.sort()).toEqual([dueNow, unscheduled].sort());
  });
});
