import { describeFeatures, withoutNewerCommands, type ServerFeatures } from '../redis/server-features.js';

/** Most streams a reader's park claims on (see ServerOffer.claimsOnRead). */
export const MAX_CLAIM_STREAMS = 32;

/**
 * What the server offers a reader, as its last (re)start found (GroupKeeper.checkServer): the
 * steps ask it each beat which path to take. Nothing is offered before the first start, nor with
 * `newerCommands: false`.
 */
export class ServerOffer {
  private found: ServerFeatures | undefined;

  constructor(private readonly allowed: boolean) {}

  /** The features found at a (re)start; a description when they differ from the last start's (a failover to another server). */
  record(features: ServerFeatures): string | undefined {
    const before = this.found;
    this.found = this.allowed ? features : withoutNewerCommands(features);
    if (!before || describeFeatures(before) === describeFeatures(this.found)) return undefined;
    return describeFeatures(this.found);
  }

  /** Undefined before the first start. */
  get features(): ServerFeatures | undefined {
    return this.found;
  }

  /**
   * Whether the park's read of `streams` streams takes idle entries too (XREADGROUP … CLAIM). Not
   * past MAX_CLAIM_STREAMS: Redis 8.6 serves a blocked CLAIM read again for every stream it waits
   * on when an entry turns claimable, a cost that grows with the square of the streams (bench
   * reclaim-path: 70–420 ms of a stalled server at 300 streams, 14 s at 3,000). The sweep scales.
   */
  claimsOnRead(streams: number): boolean {
    return this.found?.claimOnRead === true && streams <= MAX_CLAIM_STREAMS;
  }
}
