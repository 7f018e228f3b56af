import { firstValueFrom, race, timer } from 'rxjs';
import type { RateLimiter } from './rate-limiter.js';
import type { ReadAsk, ReadGate, ReadNext, ReadResult } from './read-gate.js';

/**
 * A rate-limited pattern's read (`rateLimit` without `perKey`): grants first (the group's window in
 * Redis), then a read of as many entries without BLOCK, the unused grants given back; none waiting: a
 * park for one entry, whose grant is taken when it arrives (waited for, if the window filled meanwhile).
 * No grant: the beat waits until one may be (at most its length), and the entries wait unread in the stream.
 */
export class RateGate implements ReadGate {
  constructor(private readonly limiter: Pick<RateLimiter, 'acquire' | 'refund' | 'takeOne'>) {}

  async read(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    const { limiter } = this;
    const grant = await limiter.acquire(ask.count);
    if (grant.grants === 0) {
      await firstValueFrom(race(timer(Math.min(grant.waitMs, ask.blockMs || ask.beatMs)), ask.wake$));
      return { entries: [] };
    }
    const { entries } = await next({ ...ask, blockMs: 0, count: grant.grants });
    if (entries.length < grant.grants) await limiter.refund(grant, entries.length);
    // A read ahead never parks: it would hold an entry without its grant past the batch in hand.
    if (entries.length > 0 || ask.blockMs === 0 || ask.ahead) return { entries };
    const arrived = await next({ ...ask, count: 1 });
    // The stop ended the wait for its grant: the entry is in hand all the same, and is handled (one past the limit).
    if (arrived.entries.length > 0 && !(await limiter.takeOne())) return { entries: arrived.entries, inHand: true };
    return arrived;
  }
}
