import type { StreamEntry } from '../../stream-entry.js';
import type { Custody } from '../custody/custody.js';
import type { ServerOffer } from '../read/server-offer.js';
import type { ReadAsk, ReadGate, ReadNext, ReadResult } from './read-gate.js';

/**
 * The read's CLAIM (XREADGROUP … CLAIM, Redis 8.4+): where the server offers it, the park also
 * claims entries idle past `minIdleMs` (a dead peer's) in the same round trip. A park after a read that
 * claimed reads new entries only, without BLOCK (its shape: every gate sees the park so, and none parks
 * for more), so new entries get a turn (CLAIM serves idle entries before new ones: behind a dead peer's
 * large PEL a new entry would otherwise wait for all of it, where a sweep's rounds let parks in between).
 * The innermost gate: every read the others send may claim.
 */
export class ClaimGate implements ReadGate {
  /** The last read claimed entries. */
  private claimedLast = false;

  constructor(
    private readonly d: {
      offer: Pick<ServerOffer, 'claimsOnRead'>;
      minIdleMs: number;
      custody: Pick<Custody, 'heldOn'>;
    },
  ) {}

  shape(ask: ReadAsk): ReadAsk {
    return this.claimedLast && !ask.filling && ask.blockMs !== 0 ? { ...ask, blockMs: 0 } : ask;
  }

  read(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    // Nothing to claim with this read (a server without CLAIM, or the last read claimed): forwarded as it is, no frame of its own.
    if (!this.claimedLast && !this.d.offer.claimsOnRead(ask.streams.length)) return next(ask);
    return this.claimingRead(ask, next);
  }

  private async claimingRead(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    const claim = this.d.offer.claimsOnRead(ask.streams.length) && !this.claimedLast;
    let claimed = false;
    const result = await next({
      ...ask,
      ...(claim && {
        claimMinIdleMs: this.d.minIdleMs,
        // Before the lease takes them: what a batch here holds already is told apart from what the read claimed.
        kept: (fetched: StreamEntry[]) => {
          claimed = fetched.some((e) => e.deliveryCount > 1);
          return claimed ? this.withoutHeld(fetched) : fetched;
        },
      }),
    });
    this.claimedLast = claimed;
    return result;
  }

  /**
   * Claimed with the read though a batch here holds it already (a read-ahead batch whose lease
   * lapsed while the event loop was held): that batch settles it; settling it here too would run it twice.
   */
  private withoutHeld(entries: StreamEntry[]): StreamEntry[] {
    const held = new Map<string, Set<string>>();
    return entries.filter((e) => {
      if (e.deliveryCount === 1) return true;
      let ids = held.get(e.stream);
      if (!ids) held.set(e.stream, (ids = this.d.custody.heldOn(e.stream)));
      return !ids.has(e.id);
    });
  }
}
