import { describeError } from '../../describe-error.js';
import { someIds } from '../../id-list.js';
import type { Logger } from '../../ports.js';
import { isRefusal } from '../../redis/replies/redis-errors.js';
import type { RetryCommands } from '../../redis/custody/retry-commands.js';
import type { StreamEntry } from '../../stream-entry.js';

export interface RetryOrphansDeps {
  retries: Pick<RetryCommands, 'retakeOrphans'>;
  consumer: string;
  /** How long past its due time a record must be: a consumer that owes its entry claims it at its due time (with its count), not later. */
  graceMs: number;
  logger: Logger;
}

/** Due records one call looks at, per stream: each costs Redis an XPENDING, and the script holds every other client meanwhile. */
const RECORDS_PER_CALL = 100;

/** Bytes of entries one call reads at most (it reads each one it takes back). */
const BYTES_PER_CALL = 1_048_576;

/** Streams asked in one pipeline (one round trip; a reader's streams share one slot on a cluster). */
const STREAMS_PER_ROUND = 200;

/**
 * Retries left with nobody (an **orphaned retry**): an entry waiting for its retry whose record is
 * still in the retry set (so nobody tried it since it failed) but that is in nobody's pending list.
 * Only an operator does that: an `XCLAIM` by hand gives a waiting entry to a consumer that never
 * fetched it (it knows nothing of it), and an `XGROUP DELCONSUMER` of that consumer then drops it;
 * or an `XACK` by hand. No consumer owes it any more, so none would take it back: the reclaim step
 * looks for them once per `minIdleMs` (RETAKE_ORPHANS_SCRIPT) and tries them at once, with
 * delivery count 2 (Redis dropped the real one with the consumer).
 */
export class RetryOrphans {
  /** Each stream's rank among its due records, carried from call to call (0: from the first). */
  private readonly cursors = new Map<string, number>();
  /** Redis refused the script (an ACL without +zrange on the retry sets): logged once, not asked again. */
  private refused = false;

  constructor(private readonly d: RetryOrphansDeps) {}

  /** Takes back the orphaned retries of `streams`, made pending under this consumer again: the caller tries them now. */
  async retake(streams: readonly string[]): Promise<StreamEntry[]> {
    const taken: StreamEntry[] = [];
    for (let i = 0; i < streams.length && !this.refused; i += STREAMS_PER_ROUND) {
      const round = streams.slice(i, i + STREAMS_PER_ROUND);
      const results = await this.d.retries.retakeOrphans(
        round.map((stream) => ({ stream, cursor: this.cursors.get(stream) ?? 0 })),
        this.d.consumer,
        this.d.graceMs,
        RECORDS_PER_CALL,
        BYTES_PER_CALL,
      );
      results.forEach((r, j) => {
        const stream = round[j]!;
        // Gone (NOGROUP): the loop's own path re-creates it; what was owed is rejoined there.
        if (r === null || r instanceof Error) return;
        this.cursors.set(stream, r.cursor);
        if (r.entries.length > 0) this.said(stream, r.entries);
        taken.push(...r.entries);
      });
      const failed = results.find((r): r is Error => r instanceof Error);
      // What was taken back meanwhile is pending under this consumer, its record gone: the restart's self-drain tries it.
      if (failed && !isRefusal(failed)) throw failed;
      if (failed) {
        this.refused = true;
        this.d.logger.error(
          `could not look for retries left with nobody (${describeError(failed)}; the consumer needs +zrange on the retry sets, see docs/guide/security.md): an entry waiting for its retry that an operator's XCLAIM and XGROUP DELCONSUMER drop from the pending list is not taken back`,
        );
      }
    }
    return taken;
  }

  private said(stream: string, entries: readonly StreamEntry[]): void {
    const ids = entries.map((e) => e.id);
    this.d.logger.warn(
      `failed ${ids.length === 1 ? 'entry' : 'entries'} ${someIds(ids)} of "${stream}" waited for ${ids.length === 1 ? 'its' : 'their'} retry in nobody's pending list (XGROUP DELCONSUMER of a consumer ${ids.length === 1 ? 'it was' : 'they were'} XCLAIMed to by hand, or an XACK by hand): taken back and tried now, as delivery 2 (Redis dropped ${ids.length === 1 ? 'its' : 'their'} count)`,
    );
  }
}
