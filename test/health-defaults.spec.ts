import { checkLiveness, checkReadiness, type RedisStreamsHealth } from 'nestjs-redis-streams';

// Issue 35, item 6: the probes' defaults fit Kubernetes. Liveness restarts the pod, so it fails only for
// what a restart cures (the consumer stopped, a loop stuck in a handler that never settles); a Redis
// outage is cured by no restart (every pod would restart at once, then crash-loop), so by default it
// makes the pod unready, not dead. Lag is the group's backlog, not a pod's fault: readiness on it would
// stall a rolling deploy exactly when a backlog appears, so it is checked only when asked for.

const MINUTE = 60_000;

/** A running consumer's health, with `change` applied. */
function health(change: Partial<RedisStreamsHealth> = {}, stream: Partial<RedisStreamsHealth['streams'][number]> = {}): RedisStreamsHealth {
  return {
    state: 'running',
    group: 'g',
    consumer: 'c',
    redisDownForMs: 0,
    statsAgeMs: 10,
    streams: [{ stream: 'orders', lag: 0, pending: 0, deadLetters: 0, inHand: 0, lastBeatAgeMs: 5, stuckEntries: 0, ...stream }],
    patterns: [{ pattern: 'orders', streams: 1, lag: 0, pending: 0 }],
    ...change,
  };
}

describe('health verdicts with the default thresholds', () => {
  it('liveness stays up through a Redis outage of an hour: a restart cannot bring Redis back', () => {
    expect(checkLiveness(health({ redisDownForMs: 60 * MINUTE }))).toEqual({ up: true, reasons: [] });
  });

  it('readiness goes down once Redis has been unreachable for 30 s, and not before', () => {
    expect(checkReadiness(health({ redisDownForMs: 29_000 })).up).toBe(true);
    expect(checkReadiness(health({ redisDownForMs: 31_000 }))).toEqual({
      up: false,
      reasons: ['Redis unreachable for 31000 ms (threshold 30000 ms)'],
    });
  });

  it('a backlog (lag, pending) never takes a pod out of rotation unless maxLag / maxPending are set', () => {
    expect(checkReadiness(health({}, { lag: 5_000_000, pending: 80_000 }))).toEqual({ up: true, reasons: [] });
    expect(checkReadiness(health({}, { lag: 5_000_000 }), { maxLag: 1000 }).up).toBe(false);
  });

  it('with maxLag / maxPending set, figures unread for want of Redis count only once the outage passes redisDownMs; refused ones at once', () => {
    const thresholds = { maxLag: 100, maxPending: 100, redisDownMs: 4000 };
    // Issue 48: the demo worker went unready 338 ms into an outage with HEALTH_REDIS_DOWN_MS=2000.
    expect(checkReadiness(health({ redisDownForMs: 338, statsAgeMs: 1400, statsError: 'Redis unreachable' }), thresholds)).toEqual({
      up: true,
      reasons: [],
    });
    expect(checkReadiness(health({ redisDownForMs: 4100, statsAgeMs: 5000, statsError: 'Redis unreachable' }), thresholds).reasons).toEqual(
      ['Redis unreachable for 4100 ms (threshold 4000 ms)'],
    );
    // The last figures still count while Redis is unreachable: a backlog above maxLag is one.
    expect(checkReadiness(health({ redisDownForMs: 338, statsError: 'Redis unreachable' }, { lag: 500 }), thresholds).up).toBe(false);
    // Redis answers and refuses them: unknown now.
    expect(checkReadiness(health({ statsError: 'NOPERM this user has no permissions' }), thresholds).reasons).toEqual([
      'lag and pending unknown: NOPERM this user has no permissions',
    ]);
  });

  it('liveness goes down for what a restart cures: the consumer stopped, a loop stuck in one handler for 5 min', () => {
    expect(checkLiveness(health({ state: 'stopped' })).up).toBe(false);
    const stuck = { oldestInHand: { id: '1-1', forMs: 6 * MINUTE }, lastBeatAgeMs: 6 * MINUTE };
    expect(checkLiveness(health({}, stuck)).reasons).toEqual([
      'stream "orders": loop stuck on entry 1-1 of "orders", its handler running for 360000 ms (threshold 300000 ms)',
    ]);
    // Slow, not stuck: the loop still beats.
    expect(checkLiveness(health({}, { ...stuck, lastBeatAgeMs: 50 })).up).toBe(true);
  });

  it('a Redis outage in liveness is opt-in: redisDownMs given to the liveness check', () => {
    expect(checkLiveness(health({ redisDownForMs: 31_000 }), { redisDownMs: 30_000 }).reasons).toEqual([
      'Redis unreachable for 31000 ms (threshold 30000 ms)',
    ]);
  });
});
