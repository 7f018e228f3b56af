import { randomUUID } from 'node:crypto';
import type { RateLimit } from '../options/rate-limit-options.js';
import type { RateLimitCommands } from '../redis/rate-limit-commands.js';
import type { StreamEntry } from '../stream-entry.js';

/** Longest wait a refused entry is given: the retry schedule's bound (a day). */
const MAX_WAIT_MS = 86_400_000;
/** Keys with refusals waiting beyond which the finished ones are swept (each sweep O(keys)). */
const SWEEP_ABOVE = 10_000;

/** An entry over its key's limit: retried as a RateLimitedException's entry is (its delivery not counted), in `retryInMs`. */
export class OverKeyRateLimitError extends Error {
  override readonly name = 'OverKeyRateLimitError';
  readonly rateLimited = true;

  constructor(
    readonly retryInMs: number,
    limit: RateLimit,
  ) {
    super(`over the rate limit of its key (${limit.max} per ${limit.perMs} ms)`);
  }
}

/** The retries this consumer gave a key's refused entries: the n-th comes `floor(n / max)` windows after the first. */
interface KeyQueue {
  firstAt: number;
  count: number;
  max: number;
  perMs: number;
}

/**
 * Limits per key (`rateLimit.perKey`), as each entry is about to start: one grant of its key's
 * window in Redis (shared by the group, on Redis' clock), or a wait until its turn. Refused
 * entries of one key are spread a window apart per `max` of them, so that a backlog of one key
 * comes back `max` at a time, not all at once each window (no O(backlog) of refusals per window).
 */
export class KeyRateLimits {
  private readonly token = randomUUID().slice(0, 8);
  private calls = 0;
  private readonly queues = new Map<string, KeyQueue>();
  /** The key each admitted or refused entry had: what a handler's RateLimitedException blocks. */
  private readonly keys = new WeakMap<StreamEntry, string>();

  constructor(private readonly limits: Pick<RateLimitCommands, 'acquireKey' | 'blockKey'>) {}

  /** 0: the entry may start (its key's grant taken); otherwise ms until it should be tried again. */
  async admit(name: string, entry: StreamEntry, key: string, limit: RateLimit): Promise<number> {
    this.keys.set(entry, key);
    const got = await this.limits.acquireKey(name, key, limit.max, limit.perMs, `${this.token}:${++this.calls}`);
    if (got.grants > 0) return 0;
    return this.turn(`${name}\n${key}`, got.waitMs, limit);
  }

  /** The key `entry` was admitted or refused under, if any. */
  keyOf(entry: StreamEntry): string | undefined {
    return this.keys.get(entry);
  }

  /** Slows `key` of `name` for `ms` in every worker of the group (a handler's RateLimitedException). */
  block(name: string, key: string, ms: number, by: string): Promise<void> {
    return this.limits.blockKey(name, key, ms, by);
  }

  private turn(id: string, waitMs: number, limit: RateLimit): number {
    const now = performance.now();
    if (this.queues.size > SWEEP_ABOVE) for (const [k, q] of this.queues) if (lastTurn(q) < now) this.queues.delete(k);
    let q = this.queues.get(id);
    // Every earlier refusal's turn has come: the next queue starts when the window frees a grant.
    if (!q || lastTurn(q) < now) {
      q = { firstAt: now + waitMs, count: 0, max: limit.max, perMs: limit.perMs };
      this.queues.set(id, q);
    }
    const at = q.firstAt + Math.floor(q.count / q.max) * q.perMs;
    q.count++;
    return Math.min(MAX_WAIT_MS, Math.max(waitMs, Math.ceil(at - now), 1));
  }
}

function lastTurn(q: KeyQueue): number {
  return q.firstAt + Math.floor(Math.max(0, q.count - 1) / q.max) * q.perMs;
}
