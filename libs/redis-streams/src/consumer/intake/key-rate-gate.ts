import { randomUUID } from 'node:crypto';
import type { DecodedEntry } from '../../codec/entry-codec.js';
import { keyFromFunction } from '../../codec/key-function.js';
import { partitionKeyFieldOf } from '../../codec/ordering-key.js';
import { describeError } from '../../describe-error.js';
import { quotedPreview as preview } from '../../escape-control.js';
import type { RateLimit } from '../../options/rate-limit-options.js';
import type { Logger } from '../../ports.js';
import type { RateLimitCommands } from '../../redis/intake/rate-limit-commands.js';
import { isRefusal, isRetryable } from '../../redis/replies/redis-errors.js';
import type { StreamEntry } from '../../stream-entry.js';
import { NotYet, type Admission } from '../settle/admission.js';

/** Longest wait a refused entry is given: the retry schedule's bound (a day). */
const MAX_WAIT_MS = 86_400_000;

/** How long past its turn a refused entry still counts as waiting: one that left another way (an operator's XACK) stops counting then. */
const GONE_AFTER_MS = 10_000;

/** A grants script Redis refused: its entries are tried again in a window, within these bounds. */
const REFUSED_GRANT_RETRY_MIN_MS = 100;
const REFUSED_GRANT_RETRY_MAX_MS = 5000;

/** An entry over its key's limit (the settle metrics' `error.type`). */
export class OverKeyRateLimitError extends NotYet {
  override name = 'OverKeyRateLimitError';
}

/** A key's entries this consumer refused and that have not come back yet (member → its turn, performance.now()), in the order refused. */
type KeyQueue = Map<string, number>;

/**
 * A pattern's limit per key (`rateLimit.perKey`), as each entry is about to start: one grant of its
 * key's window in Redis (shared by the group, on Redis' clock), or a wait until its turn. A refused
 * entry's turn is when the window frees a grant, a window later per `max` of its key's entries
 * already waiting here: a backlog of one key comes back `max` at a time, not all of it every
 * window (no O(backlog) of refusals per window); one back from its wait and refused again (another took
 * the grant meanwhile) goes first at the next free grant. A key function that throws or returns what
 * is not a key fails the entry as its handler would.
 */
export class KeyRateGate implements Admission {
  private readonly token = randomUUID().slice(0, 8);
  private calls = 0;
  private readonly queues = new Map<string, KeyQueue>();
  /** The key each admitted or refused entry had: what a handler's RateLimitedException slows. */
  private readonly keys = new WeakMap<StreamEntry, string>();
  /** Redis refused the grants script since the last grant: told once. */
  private refusedTold = false;
  private heldTold = false;
  /** The dashboard's list of held keys could not be written: said once (its entries are unaffected). */
  private readonly heldFailed = (err: unknown): void => {
    if (this.heldTold || isRetryable(err)) return;
    this.heldTold = true;
    this.d.logger.warn(
      `could not record the keys held back by the rate limit of "${this.d.pattern}" for the dashboard: ${describeError(err)}; the consumer needs +zadd +zremrangebyscore +zcard +zremrangebyrank +pexpire on ~${this.d.name}:rate* (docs/guide/security.md). Its entries are unaffected`,
    );
  };

  constructor(
    private readonly d: {
      /** The pattern, as its log lines name it. */
      pattern: string;
      /** Its limits' name in Redis (keyPrefix + pattern). */
      name: string;
      limit: RateLimit;
      limits: Pick<RateLimitCommands, 'acquireKey' | 'blockKey'>;
      consumer: string;
      /** How long the pattern's held set outlives its last refusal (minIdleMs: the limit's record lives as long). */
      heldTtlMs: number;
      logger: Logger;
    },
  ) {}

  pass(entry: StreamEntry, decoded: DecodedEntry): undefined | Promise<NotYet | undefined> {
    const key = limitKeyOf(this.d.limit, entry, decoded);
    if (key === undefined) return undefined;
    const { limit } = this.d;
    return this.admit(entry, key).then(
      (waitMs) =>
        waitMs === 0 ? undefined : new OverKeyRateLimitError(waitMs, `over the rate limit of its key (${limit.max} per ${limit.perMs} ms)`),
      (err: unknown) => {
        // Redis failing (a lost connection): the loop's way. Redis refusing the script (an ACL without its
        // rights): every entry would be refused alike, and a restart would count their deliveries; they wait
        // uncounted instead, a window at a time, and the operator is told once what is missing.
        if (!isRefusal(err)) throw err;
        const retryInMs = Math.min(Math.max(limit.perMs, REFUSED_GRANT_RETRY_MIN_MS), REFUSED_GRANT_RETRY_MAX_MS);
        if (!this.refusedTold) {
          this.refusedTold = true;
          this.d.logger.error(
            `could not take a grant of the rate limit of key ${preview(key)} of "${this.d.pattern}": ${describeError(err)}; the consumer needs +zadd +zrem +zcard +zrange +zremrangebyscore +pexpire +pttl +set on ~${this.d.name}:keyrate* (docs/guide/security.md). Its entries wait, tried again every ${retryInMs} ms, their deliveries not counted`,
          );
        }
        return new OverKeyRateLimitError(retryInMs, `could not take a grant of its key's rate limit (${limit.max} per ${limit.perMs} ms)`);
      },
    );
  }

  slow(entry: StreamEntry, ms: number): { what: string; slowed: Promise<void> } | undefined {
    const key = this.keys.get(entry);
    if (key === undefined) return undefined;
    return { what: `key ${preview(key)} of "${this.d.pattern}"`, slowed: this.d.limits.blockKey(this.d.name, key, ms, this.d.consumer) };
  }

  /** 0: the entry may start (its key's grant taken); otherwise ms until it should be tried again. */
  private async admit(entry: StreamEntry, key: string): Promise<number> {
    const { limit } = this.d;
    this.keys.set(entry, key);
    const member = `${entry.stream}\n${entry.id}`;
    // Back from its wait: no longer ahead of the others, and first in line if refused again.
    const returning = this.queues.get(key)?.delete(member) ?? false;
    const got = await this.d.limits.acquireKey(
      this.d.name,
      key,
      limit.max,
      limit.perMs,
      `${this.token}:${++this.calls}`,
      this.d.heldTtlMs,
      this.heldFailed,
    );
    const queue = this.queues.get(key);
    const now = performance.now();
    if (queue) {
      // Oldest first: those long past their turn left another way.
      for (const [m, turn] of queue) {
        if (turn > now - GONE_AFTER_MS) break;
        queue.delete(m);
      }
      if (queue.size === 0) this.queues.delete(key);
    }
    if (got.grants > 0) {
      this.refusedTold = false;
      return 0;
    }
    const q = this.queues.get(key) ?? new Map<string, number>();
    this.queues.set(key, q);
    // A newcomer waits behind the ones already waiting, a window per `max` of them; one whose turn came (and
    // whose grant another took meanwhile) goes at the next free grant, ahead of them.
    const ahead = returning ? 0 : q.size;
    const waitMs = Math.min(MAX_WAIT_MS, got.waitMs + Math.floor(ahead / limit.max) * limit.perMs);
    q.set(member, now + waitMs);
    return waitMs;
  }
}

/** The entry's key under `limit.perKey`: its partition key, or what the key function returns; undefined for none. */
function limitKeyOf(limit: RateLimit, entry: StreamEntry, decoded: DecodedEntry): string | undefined {
  if (limit.perKey === true) return partitionKeyFieldOf(entry) || undefined;
  return keyFromFunction('rateLimit.perKey', limit.perKey!, decoded);
}
