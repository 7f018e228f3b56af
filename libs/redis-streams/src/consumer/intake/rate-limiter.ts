import { randomUUID } from 'node:crypto';
import { firstValueFrom, race, timer } from 'rxjs';
import type { RateLimit } from '../../options/rate-limit-options.js';
import type { RateLimitCommands } from '../../redis/intake/rate-limit-commands.js';
import type { StopSignal } from '../stop-signal.js';

/** Grants one acquire took (members `prefix`1…`grants`), or none and how long until one may be. */
export interface Grant {
  grants: number;
  waitMs: number;
  prefix: string;
}

export interface RateLimiterDeps {
  limits: Pick<RateLimitCommands, 'acquire' | 'refund'>;
  /** The pattern's name (keyPrefix + pattern): one limit for all its partitions. */
  name: string;
  limit: RateLimit;
  stop: StopSignal;
}

/** Longest wait between two tries of a grant for an entry already read. */
const TAKE_ONE_EVERY_MS = 1000;

/**
 * A rate-limited pattern's grants for one reader: taken from the group's window in Redis before
 * a read (so adding workers does not raise the rate), given back when the read brought fewer.
 */
export class RateLimiter {
  private readonly token = randomUUID().slice(0, 8);
  private calls = 0;

  constructor(private readonly d: RateLimiterDeps) {}

  async acquire(want: number): Promise<Grant> {
    const prefix = `${this.token}:${++this.calls}:`;
    const { max, perMs } = this.d.limit;
    const got = await this.d.limits.acquire(this.d.name, max, perMs, Math.min(want, max), prefix);
    return { ...got, prefix };
  }

  /** The grants past `used` go back to the window. */
  refund(grant: Grant, used: number): Promise<void> {
    return this.d.limits.refund(this.d.name, grant.prefix, used, grant.grants);
  }

  /**
   * The grant of one entry a park brought while none was held: waited for while the window is full.
   * False when stopping ended the wait: the entry is in hand all the same, and is handled (one past the limit).
   */
  async takeOne(): Promise<boolean> {
    const { stop } = this.d;
    while (!stop.stopped) {
      const grant = await this.acquire(1);
      if (grant.grants > 0) return true;
      await firstValueFrom(race(timer(Math.min(grant.waitMs, TAKE_ONE_EVERY_MS)), stop.stopped$));
    }
    return false;
  }
}
