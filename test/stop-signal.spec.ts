/** A loop's one stop signal, without Redis: stopping, abandoning, and the shared bound on the steps after the handlers. */
import { firstValueFrom } from 'rxjs';
import { STOP_STEPS_WITHIN_MS, StopSignal, type StopReason } from '../libs/redis-streams/src/consumer/stop-signal.js';

/** A logger that keeps its warnings. */
const logger = () => {
  const warnings: string[] = [];
  return { warnings, log: () => {}, warn: (m: string) => void warnings.push(m), error: () => {} };
};

/** A promise the test settles itself. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Whether `promise` has settled, read after the microtasks queued so far have run. */
function tracked(promise: Promise<unknown>) {
  const state = { done: false, failed: undefined as unknown };
  promise.then(
    () => void (state.done = true),
    (err: unknown) => void Object.assign(state, { done: true, failed: err }),
  );
  return state;
}

describe('StopSignal: stopping and abandoning', () => {
  it('starts running: neither stopped nor abandoned, and stopped$ has not emitted', () => {
    const stop = new StopSignal();
    const seen: StopReason[] = [];
    const sub = stop.stopped$.subscribe((r) => seen.push(r));
    expect([stop.stopped, stop.abandoned]).toEqual([false, false]);
    expect(seen).toEqual([]);
    sub.unsubscribe();
  });

  it('stop() says whether it was the first; stopped$ emits once, and at once to a late subscriber', () => {
    const stop = new StopSignal();
    const seen: StopReason[] = [];
    let completed = false;
    stop.stopped$.subscribe({ next: (r) => seen.push(r), complete: () => (completed = true) });
    expect(stop.stop('stopping')).toBe(true);
    expect(stop.stop('stopping')).toBe(false);
    expect([stop.stopped, stop.abandoned]).toEqual([true, false]);
    expect(seen).toEqual(['stopping']);
    expect(completed).toBe(true);
    const late: StopReason[] = [];
    stop.stopped$.subscribe((r) => late.push(r));
    expect(late).toEqual(['stopping']);
  });

  it('abandoning a stopping loop upgrades it (and is not a first stop); stopping never downgrades an abandoned one', async () => {
    const upgraded = new StopSignal();
    upgraded.stop('stopping');
    expect(upgraded.stop('abandoned')).toBe(false);
    expect([upgraded.stopped, upgraded.abandoned]).toEqual([true, true]);
    expect(await firstValueFrom(upgraded.stopped$)).toBe('abandoned');

    const abandoned = new StopSignal();
    expect(abandoned.stop('abandoned')).toBe(true);
    abandoned.stop('stopping');
    expect([abandoned.stopped, abandoned.abandoned]).toEqual([true, true]);
    expect(await firstValueFrom(abandoned.stopped$)).toBe('abandoned');
  });
});

describe('StopSignal.bounded: the steps after the handlers, once stopping', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('before stopping, waits for the work however long it takes, and warns of nothing', async () => {
    const stop = new StopSignal();
    const log = logger();
    const work = deferred();
    const state = tracked(stop.bounded(work.promise, () => 'the ack', log));
    await vi.advanceTimersByTimeAsync(STOP_STEPS_WITHIN_MS * 10);
    expect(state.done).toBe(false);
    work.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(state).toEqual({ done: true, failed: undefined });
    expect(log.warnings).toEqual([]);
  });

  it('before stopping, a failure rejects', async () => {
    const stop = new StopSignal();
    await expect(stop.bounded(Promise.reject(new Error('READONLY')), () => 'the ack', logger())).rejects.toThrow('READONLY');
  });

  it('once stopping, gives up after STOP_STEPS_WITHIN_MS and says what was not confirmed', async () => {
    const stop = new StopSignal();
    stop.stop('stopping');
    const log = logger();
    const state = tracked(stop.bounded(new Promise(() => {}), () => 'the last ack', log));
    await vi.advanceTimersByTimeAsync(STOP_STEPS_WITHIN_MS - 1);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state).toEqual({ done: true, failed: undefined });
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]).toMatch(/^the last ack not confirmed by Redis within 2000 ms of stopping: left pending/);
  });

  it('once stopping, work that ends in time is simply awaited', async () => {
    const stop = new StopSignal();
    stop.stop('stopping');
    const log = logger();
    const work = deferred();
    const state = tracked(stop.bounded(work.promise, () => 'the hand-back', log));
    await vi.advanceTimersByTimeAsync(STOP_STEPS_WITHIN_MS / 2);
    work.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(state).toEqual({ done: true, failed: undefined });
    expect(log.warnings).toEqual([]);
  });

  it('the bound is shared by every step: the second step gets what the first left of it', async () => {
    const stop = new StopSignal();
    stop.stop('stopping');
    const log = logger();
    const first = deferred();
    const firstState = tracked(stop.bounded(first.promise, () => 'first', log));
    await vi.advanceTimersByTimeAsync(1500);
    first.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(firstState.done).toBe(true);
    const second = tracked(stop.bounded(new Promise(() => {}), () => 'second', log));
    await vi.advanceTimersByTimeAsync(STOP_STEPS_WITHIN_MS - 1500 - 1);
    expect(second.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(second.done).toBe(true);
    expect(log.warnings).toEqual([expect.stringMatching(/^second not confirmed/)]);
  });

  it('once stopping, a failure in time still rejects; one after the bound is nobody’s (no unhandled rejection)', async () => {
    const stop = new StopSignal();
    stop.stop('stopping');
    const log = logger();
    await expect(stop.bounded(Promise.reject(new Error('NOGROUP')), () => 'x', log)).rejects.toThrow('NOGROUP');
    const late = deferred();
    const state = tracked(stop.bounded(late.promise, () => 'the late one', log));
    await vi.advanceTimersByTimeAsync(STOP_STEPS_WITHIN_MS);
    expect(state).toEqual({ done: true, failed: undefined });
    // Vitest fails the file on an unhandled rejection: this one must be caught inside bounded().
    late.reject(new Error('too late'));
    await vi.advanceTimersByTimeAsync(0);
  });
});
