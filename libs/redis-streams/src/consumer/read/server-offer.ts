import type { DeleteOnAck } from '../../options/server-options.js';
import { describeFeatures, withoutNewerCommands, type ServerFeatures } from '../../redis/server-features.js';
import type { AckDeletePolicy } from '../../redis/stream-commands.js';

/**
 * `deleteOnAck` as XACKDEL says it. The only group: KEEPREF (DELREF would also strip other groups'
 * pending lists, silently, at a cost per group; KEEPREF leaves their references, which their readers
 * report as deleted). Other groups too: ACKED.
 */
const ACK_DELETE_POLICY: Record<Exclude<DeleteOnAck, false>, AckDeletePolicy> = { 'this-group': 'KEEPREF', 'all-groups': 'ACKED' };

/** Most streams a reader's park claims on (see ServerOffer.claimsOnRead). */
export const MAX_CLAIM_STREAMS = 32;

/**
 * What the server offers a reader, as its last (re)start found (GroupKeeper.checkServer): the
 * steps ask it each beat which path to take. Nothing is offered before the first start, nor with
 * `newerCommands: false`.
 */
export class ServerOffer {
  private found: ServerFeatures | undefined;

  constructor(
    private readonly allowed: boolean,
    readonly deleteOnAck: DeleteOnAck = false,
    /** False for an ordered stream: CLAIM serves the most idle entries first, out of their keys' order. */
    private readonly claimAllowed = true,
    /** An ordered stream's durable acks with fsync: they wait with WAITAOF (Redis or Valkey 7.2). */
    private readonly needsWaitAof = false,
  ) {}

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
    return this.claimAllowed && this.found?.claimOnRead === true && streams <= MAX_CLAIM_STREAMS;
  }

  /** How acks delete what they ack (`deleteOnAck`), once a start found XACKDEL; undefined: plain XACK. */
  get ackDelete(): AckDeletePolicy | undefined {
    return this.deleteOnAck && this.found?.ackDelete ? ACK_DELETE_POLICY[this.deleteOnAck] : undefined;
  }

  /** Why the server found last cannot serve the options (it lacks a command one of them needs); undefined when it can. */
  unmet(): string | undefined {
    const found = this.found;
    // Not looked up (COMMAND refused): the waits themselves say so, held with the refusal in the log and health.
    if (this.needsWaitAof && found && !found.waitAof && !found.lookupError)
      return `durableAcks.fsync needs WAITAOF (Redis or Valkey 7.2 or later); the server is ${found.server}: drop fsync, or run a newer server`;
    if (!this.deleteOnAck || !found || found.ackDelete) return undefined;
    const needs = `deleteOnAck: '${this.deleteOnAck}' needs XACKDEL (Redis 8.2 or later)`;
    if (!this.allowed) return `${needs}, which newerCommands: false turns off: drop one of the two options`;
    if (found.lookupError)
      return `${needs}; the server is ${found.server} and refused COMMAND INFO (${found.lookupError}): on Redis 8.2 or later, grant the user +command|info +command|docs`;
    return `${needs}; the server is ${found.server}: remove deleteOnAck, or run Redis 8.2 or later`;
  }
}
