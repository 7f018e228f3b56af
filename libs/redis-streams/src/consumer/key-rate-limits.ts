import { randomUUID } from 'node:crypto';
import type { RateLimit } from '../options/rate-limit-options.js';
import type { RateLimitCommands } from '../redis/rate-limit-commands.js';
import type { StreamEntry } from '../stream-entry.js';

/** Longest wait a refused entry is given: the retry schedule's bound (a day). */
const MAX_WAIT_MS = 86_400_000;

/** An entry over its key's limit: retried as a RateLimitedException's entry is (its delivery not counted), in `retryInMs`. */
export class OverKeyRateLimitError extends Error {
  override readonly name = 'OverKeyRateLimitError';
  readonly rateLimited = true;

  constructor(
    readonly retryInMs: number,
    limit: RateLimit,
    why = 'over the rate limit of its key',
  ) {
    super(`${why} (${limit.max} per ${limit.perMs} ms)`);
  }
}

/** How long past its turn a refused entry still counts as waiting: one that left another way (an operator's XACK) stops counting then. */
const GONE_AFTER_MS = 10_000;

/** A key's entries this consumer refused and that have not come back yet (member → its turn, performance.now()), in the order refused. */
type KeyQueue = Map<string, number>;

/**
 * Limits per key (`rateLimit.perKey`), as each entry is about to start: one grant of its key's
 * window in Redis (shared by the group, on Redis' clock), or a wait until its turn. A refused
 * entry's turn is when the window frees a grant, a window later per `max` of its key's entries
 * already waiting here: a backlog of one key comes back `max` at a time, not all of it every
 * window (no O(backlog) of refusals per window); one back from its wait and refused again (another took
 * the grant meanwhile) goes first at the next free grant.
 */
export class KeyRateLimits {
  private readonly token = randomUUID().slice(0, 8);
  private calls = 0;
  private readonly queues = new Map<string, KeyQueue>();
  /** The key each admitted or refused entry had: what a handler's RateLimitedException blocks. */
  private readonly keys = new WeakMap<StreamEntry, string>();
  /** Patterns whose grants script Redis refused, since their last grant: told once. */
  private readonly refusedNames = new Set<string>();

  constructor(private readonly limits: Pick<RateLimitCommands, 'acquireKey' | 'blockKey'>) {}

  /** 0: the entry may start (its key's grant taken); otherwise ms until it should be tried again. */
  async admit(name: string, entry: StreamEntry, key: string, limit: RateLimit): Promise<number> {
    this.keys.set(entry, key);
    const id = `${name}\n${key}`;
    const member = `${entry.stream}\n${entry.id}`;
    // Back from its wait: no longer ahead of the others, and first in line if refused again.
    const returning = this.queues.get(id)?.delete(member) ?? false;
    const got = await this.limits.acquireKey(name, key, limit.max, limit.perMs, `${this.token}:${++this.calls}`);
    const queue = this.queues.get(id);
    const now = performance.now();
    if (queue) {
      // Oldest first: those long past their turn left another way.
      for (const [m, turn] of queue) {
        if (turn > now - GONE_AFTER_MS) break;
        queue.delete(m);
      }
      if (queue.size === 0) this.queues.delete(id);
    }
    if (got.grants > 0) {
      this.refusedNames.delete(name);
      return 0;
    }
    const q = this.queues.get(id) ?? new Map<string, number>();
    this.queues.set(id, q);
    // A newcomer waits behind the ones already waiting, a window per `max` of them; one whose turn came (and
    // whose grant another took meanwhile) goes at the next free grant, ahead of them.
    const ahead = returning ? 0 : q.size;
    const waitMs = Math.min(MAX_WAIT_MS, got.waitMs + Math.floor(ahead / limit.max) * limit.perMs);
    q.set(member, now + waitMs);
    return waitMs;
  }

  /** Redis refused `name`'s grants script: true the first time since its last grant (to be told). */
  refused(name: string): boolean {
    if (this.refusedNames.has(name)) return false;
    this.refusedNames.add(name);
    return true;
  }

  /** The key `entry` was admitted or refused under, if any. */
  keyOf(entry: StreamEntry): string | undefined {
    return this.keys.get(entry);
  }

  /** Slows `key` of `name` for `ms` in every worker of the group (a handler's RateLimitedException). */
  block(name: string, key: string, ms: number, by: string): Promise<void> {
    return this.limits.blockKey(name, key, ms, by);
  }
}
