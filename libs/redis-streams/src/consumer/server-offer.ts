import { describeFeatures, withoutNewerCommands, type ServerFeatures } from '../redis/server-features.js';

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

  /** XREADGROUP … CLAIM: the park's read takes idle entries too. */
  get claimOnRead(): boolean {
    return this.found?.claimOnRead === true;
  }
}
