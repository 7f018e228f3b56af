import { describe, expect, it } from 'vitest';
import { checkedDelay, MAX_RETRY_DELAY_MS, resolveRetry } from '../libs/redis-streams/src/options/retry-options.js';

describe('retry policies, without Redis', () => {
  it('fixed: the same delay after every failure', () => {
    const delay = resolveRetry('retry', { backoff: { type: 'fixed', delayMs: 250 } })!;
    expect([1, 2, 5].map((n) => delay(n, undefined))).toEqual([250, 250, 250]);
  });

  it('exponential: delayMs × 2^(delivery − 1), capped at maxDelayMs (a day without one)', () => {
    const capped = resolveRetry('retry', { backoff: { type: 'exponential', delayMs: 1000, maxDelayMs: 5000 } })!;
    expect([1, 2, 3, 4, 10].map((n) => capped(n, undefined))).toEqual([1000, 2000, 4000, 5000, 5000]);
    const uncapped = resolveRetry('retry', { backoff: { type: 'exponential', delayMs: 1000 } })!;
    expect(uncapped(1000, undefined)).toBe(MAX_RETRY_DELAY_MS);
  });

  it('jitter takes up to its share off each delay, never adds to it', () => {
    const delay = resolveRetry('retry', { backoff: { type: 'fixed', delayMs: 1000, jitter: 0.5 } })!;
    const delays = Array.from({ length: 200 }, () => delay(1, undefined));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...delays)).toBeLessThanOrEqual(1000);
    expect(new Set(delays).size).toBeGreaterThan(1);
  });

  it('a function gets the failed delivery and the error', () => {
    const seen: unknown[] = [];
    const error = new Error('429');
    const delay = resolveRetry('retry', { backoff: (n: number, e: unknown) => (seen.push([n, e]), n * 10) })!;
    expect(delay(3, error)).toBe(30);
    expect(seen).toEqual([[3, error]]);
  });

  it('unset: no policy', () => {
    expect(resolveRetry('retry', undefined)).toBeUndefined();
  });

  it("a function's or a RetryLaterException's delay is checked when used: a whole number of ms, at most a day, else why not", () => {
    expect(checkedDelay(12.6)).toBe(13);
    expect(checkedDelay(MAX_RETRY_DELAY_MS * 2)).toBe(MAX_RETRY_DELAY_MS);
    expect(checkedDelay(-1)).toMatch(/at least 0; got -1/);
    expect(checkedDelay(Number.NaN)).toMatch(/finite number/);
    expect(checkedDelay('20')).toMatch(/finite number/);
  });
});
